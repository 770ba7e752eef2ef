import type { Argv, CommandModule } from 'yargs';
import { parseDuration } from '../config/config.js';
import { EnvironmentError, ExitCode, isCniRewindError } from '../core/errors.js';
import { preferSmallHeap } from '../core/heap.js';
import { Reporter } from '../io/host.js';
import { redact } from '../io/redact.js';
// Types only: the Kubernetes client is imported when a command first asks for it (not for --help, version, inspect).
import type { KubeApiError, KubeClient } from '../kube/client.js';
import { ConsoleIoHost } from './console-host.js';
import { escapeControl, renderData, styler, type OutputFormat, type Styler } from './output.js';

export interface GlobalArgs {
  kubeconfig?: string;
  context?: string;
  as?: string;
  'as-group'?: string[];
  'request-timeout'?: string;
  output: OutputFormat;
  yes: boolean;
  verbose: boolean;
  quiet: boolean;
  color: boolean;
}

/** What every command handler gets: the I/O host, output helpers and a lazily connected client. */
export class CliContext {
  readonly host: ConsoleIoHost;
  readonly reporter: Reporter;
  readonly style: Styler;
  private clientPromise?: Promise<KubeClient>;

  constructor(readonly args: GlobalArgs) {
    this.host = new ConsoleIoHost({ verbose: args.verbose, quiet: args.quiet, color: args.color && !process.env.NO_COLOR });
    this.reporter = new Reporter(this.host);
    this.style = styler(args.color && !process.env.NO_COLOR && !!process.stdout.isTTY);
  }

  client(): Promise<KubeClient> {
    this.clientPromise ??= import('../kube/client.js').then(({ KubeClient }) =>
      KubeClient.connect({
        kubeconfig: this.args.kubeconfig,
        context: this.args.context,
        as: this.args.as,
        asGroups: this.args['as-group'],
        requestTimeoutMs: this.args['request-timeout'] === undefined ? undefined : parseDuration(this.args['request-timeout'], '--request-timeout'),
      }).then((c) => {
        c.onRetry = (i) => this.reporter.debug('CNR_KUBE_RETRY', `retrying ${i.method} ${i.path} in ${i.delayMs} ms: ${i.reason}`);
        return c;
      }),
    );
    return this.clientPromise;
  }

  async close(): Promise<void> {
    this.host.close();
    if (this.clientPromise) (await this.clientPromise.catch(() => undefined))?.close();
  }

  /** Print a result: `-o json|yaml` as data, otherwise the given human rendering. */
  print(data: unknown, human: () => string): void {
    const text = this.args.output === 'table' ? human() : renderData(data, this.args.output);
    if (text) this.host.result(text);
  }
}

/**
 * Wrap a handler: build the context, run, map errors to one clear line and the documented exit code.
 * A stack trace is shown only with -v.
 */
export function handler<A>(fn: (ctx: CliContext, args: A & GlobalArgs) => Promise<number | void>): (args: A & GlobalArgs) => Promise<void> {
  return async (args) => {
    preferSmallHeap();
    const ctx = new CliContext(args);
    // If the event loop runs dry while the command still waits on something (a promise nothing will ever settle),
    // Node would exit with code 0 as if it had succeeded. Never let that pass for success.
    let settled = false;
    const stalled = () => {
      if (settled) return;
      process.stderr.write(
        'cni-rewind: internal error: the command stopped before it finished (it waited on something that can never happen)\n  rerun with -v and report it\n',
      );
      process.exitCode = 1;
    };
    process.once('beforeExit', stalled);
    try {
      const code = await fn(ctx, args);
      process.exitCode = code ?? ExitCode.Ok;
    } catch (err) {
      ctx.host.close();
      process.exitCode = reportError(err, args.verbose, ctx.style);
    } finally {
      settled = true;
      process.off('beforeExit', stalled);
      await ctx.close();
    }
  };
}

export function reportError(err: unknown, verbose: boolean, s: Styler): number {
  let e = err;
  if (isKubeApiError(e)) e = apiErrorToEnvironment(e);
  if (!isCniRewindError(e) && isLocalResourceError(e)) {
    // A full disk, a read-only or forbidden path: the machine's problem, not the input's and not a bug.
    const x = e as NodeJS.ErrnoException;
    e = new EnvironmentError(`${x.message.replace(/^E[A-Z]+: /, '')}`, {
      cause: e,
      hint: x.code === 'ENOSPC' || x.code === 'EDQUOT' ? 'free some space, or choose another --out' : undefined,
    });
  }
  if (isCniRewindError(e)) {
    process.stderr.write(`${s.red('cni-rewind:')} ${escapeControl(redact(e.message))}\n`);
    if (typeof e.hint === 'string' && e.hint) process.stderr.write(`  ${escapeControl(redact(e.hint))}\n`);
    if (verbose && e.stack) process.stderr.write(redact(String(e.stack)) + '\n');
    return e.exitCode;
  }
  const msg = err instanceof Error ? err.message : String(err);
  process.stderr.write(`${s.red('cni-rewind:')} unexpected error: ${escapeControl(redact(msg))}\n`);
  if (verbose && err instanceof Error && err.stack) process.stderr.write(redact(err.stack) + '\n');
  else process.stderr.write('  rerun with -v for details\n');
  return ExitCode.Differences;
}

/** 401 and 403 say which one it was, as whom and on what: the fixes differ (log in again vs ask for RBAC). */
export function apiErrorToEnvironment(e: KubeApiError): EnvironmentError {
  const who = e.user ? `user "${e.user}"` : 'the current user';
  if (e.statusCode === 401) {
    return new EnvironmentError(`Kubernetes API unauthorized (HTTP 401): the server did not accept the credentials of ${who} on ${e.method} ${e.path}`, {
      cause: e,
      hint: 'the token or certificate is invalid or expired (they were fetched anew once); log in again or check the kubeconfig user',
    });
  }
  if (e.statusCode === 403) {
    return new EnvironmentError(`Kubernetes API forbidden (HTTP 403): ${who} may not ${verbOf(e.method, e.path)} ${e.path}: ${e.message}`, {
      cause: e,
      hint: 'the credentials are valid but RBAC does not allow this; see docs/kubeconfig-and-storage.md for the permissions each command needs',
    });
  }
  return new EnvironmentError(`Kubernetes API HTTP ${e.statusCode}: ${e.message}`, { cause: e });
}

function verbOf(method: string, path: string): string {
  const verbs: Record<string, string> = { POST: 'create', PUT: 'update', PATCH: 'patch', DELETE: 'delete' };
  if (verbs[method]) return verbs[method];
  // GET of a collection (…/<plural> or …/namespaces/<ns>/<plural>) is a list, of one object a get.
  const parts = path.split('?')[0]!.split('/').filter(Boolean);
  const rest = parts[0] === 'api' ? parts.slice(2) : parts[0] === 'apis' ? parts.slice(3) : parts;
  const items = rest[0] === 'namespaces' && rest.length > 2 ? rest.slice(2) : rest;
  return items.length % 2 === 1 ? 'list' : 'get';
}

export type Command<A = object> = CommandModule<GlobalArgs, A & GlobalArgs>;
export type Builder<A> = (y: Argv<GlobalArgs>) => Argv<A & GlobalArgs>;

/**
 * Recognised by its name rather than `instanceof`, so that this module need not import the Kubernetes client (and
 * everything it loads) only to classify an error.
 */
function isKubeApiError(e: unknown): e is KubeApiError {
  return e instanceof Error && e.name === 'KubeApiError' && typeof (e as KubeApiError).statusCode === 'number';
}

const LOCAL_RESOURCE_CODES = new Set(['ENOSPC', 'EDQUOT', 'EROFS', 'EACCES', 'EPERM', 'EIO', 'EMFILE', 'ENFILE']);
function isLocalResourceError(e: unknown): boolean {
  return (
    e instanceof Error &&
    typeof (e as NodeJS.ErrnoException).code === 'string' &&
    LOCAL_RESOURCE_CODES.has((e as NodeJS.ErrnoException).code!) &&
    typeof (e as NodeJS.ErrnoException).syscall === 'string'
  );
}
