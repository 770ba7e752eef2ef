/**
 * The CLI owns process signals; the engine only sees an AbortSignal. SIGINT/SIGTERM abort it while the engine
 * listens (a stretch it can stop gracefully: snapshots in flight recorded, writes in flight finished, guards put
 * back, a half-written bundle removed); at any other moment the signal does what it would do without a handler,
 * so the process ends at once as before.
 */
import { InterruptedError, isListened } from '../io/abort.js';

const SIGNALS = ['SIGINT', 'SIGTERM'] as const;

export class SignalScope {
  private readonly controller = new AbortController();
  /** While true SIGINT is ignored: a child process on the terminal got the same Ctrl-C and decides (wrap). */
  ignoreInterrupt = false;
  private readonly onSignal = (sig: NodeJS.Signals) => {
    if (sig === 'SIGINT' && this.ignoreInterrupt) return;
    if (isListened(this.signal)) {
      this.controller.abort(sig); // a second signal while the engine winds down changes nothing
      return;
    }
    this.raise(sig);
  };

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Runs `fn` with signals handled as above. An engine that stopped at once (InterruptedError) ends the process by its signal. */
  static async run<T>(fn: (scope: SignalScope) => Promise<T>): Promise<T> {
    const scope = new SignalScope();
    for (const s of SIGNALS) process.on(s, scope.onSignal);
    try {
      return await fn(scope);
    } catch (err) {
      if (err instanceof InterruptedError && (SIGNALS as readonly string[]).includes(err.reason)) scope.raise(err.reason as NodeJS.Signals);
      throw err;
    } finally {
      scope.dispose();
    }
  }

  /** The signal's default action: the process ends by it, as if no handler had been installed. */
  private raise(sig: NodeJS.Signals): void {
    this.dispose();
    process.kill(process.pid, sig);
  }

  private dispose(): void {
    for (const s of SIGNALS) process.off(s, this.onSignal);
  }
}
