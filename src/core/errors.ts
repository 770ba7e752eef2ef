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

/**
 * The brand every cni-rewind error carries. `Symbol.for` gives the same symbol in every copy of the package
 * (a provider built against its own copy, a plugin bundling the kit), where `instanceof` would only recognise
 * errors made by this copy's classes. Recognise errors with `isCniRewindError`, never with `instanceof`.
 */
export const ERROR_BRAND: unique symbol = Symbol.for('cni-rewind.error') as never;

export type ErrorKind = 'bad-input' | 'environment' | 'refused' | 'partial' | 'error';

const KIND_OF_EXIT: Record<number, ErrorKind> = {
  [ExitCode.BadInput]: 'bad-input',
  [ExitCode.Environment]: 'environment',
  [ExitCode.Refused]: 'refused',
  [ExitCode.Partial]: 'partial',
};

/** What an error from any copy of cni-rewind (or any object branded like one) looks like. */
export interface BrandedError extends Error {
  readonly [ERROR_BRAND]: true;
  readonly kind: ErrorKind;
  readonly exitCode: ExitCode;
  readonly hint?: string;
}

export class CniRewindError extends Error implements BrandedError {
  readonly [ERROR_BRAND] = true as const;
  readonly kind: ErrorKind;
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
    this.kind = KIND_OF_EXIT[exitCode] ?? 'error';
  }
}

const EXIT_CODES = new Set<number>(Object.values(ExitCode).filter((c) => c !== ExitCode.Ok));

/** True for an error carrying the cni-rewind brand with a valid exit code, whichever copy of the package made it. */
export function isCniRewindError(err: unknown): err is BrandedError {
  if (typeof err !== 'object' || err === null) return false;
  const e = err as Partial<BrandedError>;
  return e[ERROR_BRAND] === true && typeof e.message === 'string' && typeof e.exitCode === 'number' && EXIT_CODES.has(e.exitCode);
}

/** Whether `err` is a branded error of this kind (in place of `instanceof BadInputError` and friends). */
export function isErrorKind(err: unknown, kind: ErrorKind): err is BrandedError {
  return isCniRewindError(err) && err.kind === kind;
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
