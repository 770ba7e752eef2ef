/**
 * Exit codes and typed errors, the same meaning in every command (README.md, "Exit codes").
 * The engine throws these; the CLI turns them into one clear line and the exit code.
 */
export const ExitCode = {
  Ok: 0,
  /** differences or warnings found (`diff`, `doctor`) */
  Differences: 1,
  /** usage error or bad input (`doctor`: errors found) */
  BadInput: 2,
  /** some objects or nodes failed */
  Partial: 3,
  /** cluster or provider unreachable, no permission */
  Environment: 4,
  /** refused by a safety check: preflight failed, lock held, bundle from another cluster */
  Refused: 5,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

export class CniRewindError extends Error {
  /** What the user can do about it, printed on a second line when present. */
  readonly hint?: string;
  constructor(
    message: string,
    readonly exitCode: ExitCode,
    opts: { hint?: string; cause?: unknown } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.hint = opts.hint;
  }
}

/** Bad flags, a file that is not what it should be, a bundle that fails to parse. Exit 2. */
export class BadInputError extends CniRewindError {
  constructor(message: string, opts: { hint?: string; cause?: unknown } = {}) {
    super(message, ExitCode.BadInput, opts);
  }
}

/** The cluster or a provider cannot be reached, or refuses us. Exit 4. */
export class EnvironmentError extends CniRewindError {
  constructor(message: string, opts: { hint?: string; cause?: unknown } = {}) {
    super(message, ExitCode.Environment, opts);
  }
}

/** A safety check said no. Exit 5. */
export class RefusedError extends CniRewindError {
  constructor(message: string, opts: { hint?: string; cause?: unknown } = {}) {
    super(message, ExitCode.Refused, opts);
  }
}

/** Some of the work failed; the rest was done. Exit 3. */
export class PartialFailureError extends CniRewindError {
  constructor(message: string, opts: { hint?: string; cause?: unknown } = {}) {
    super(message, ExitCode.Partial, opts);
  }
}

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
