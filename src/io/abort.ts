import { getEventListeners } from 'node:events';

/**
 * The engine is told to stop through an AbortSignal that its caller owns (the CLI aborts it on SIGINT/SIGTERM).
 * A module listens only while it can stop gracefully (finish what is in flight, record it, put things back).
 */

/** The abort's reason in words: the signal name the CLI aborts with, or `aborted`. */
export function abortReason(signal: AbortSignal): string {
  const r: unknown = signal.reason;
  if (typeof r === 'string') return r;
  return r instanceof Error && r.name !== 'AbortError' ? r.message : 'aborted';
}

/**
 * Calls `fn` once when `signal` aborts (at once when it already has); returns what stops listening. Without a
 * signal nothing ever happens.
 */
export function whenAborted(signal: AbortSignal | undefined, fn: (reason: string) => void): () => void {
  if (!signal) return () => undefined;
  const listener = () => fn(abortReason(signal));
  // Not `once`: the listener stays until the window closes, so the signal's owner can tell it is still open.
  signal.addEventListener('abort', listener);
  if (signal.aborted) listener();
  return () => signal.removeEventListener('abort', listener);
}

/** Thrown by an engine entry point that stops at once when aborted (after its cleanup), instead of finishing. */
export class InterruptedError extends Error {
  constructor(readonly reason: string) {
    super(`interrupted (${reason})`);
    this.name = 'InterruptedError';
  }
}

/** True while some code listens to `signal` (an engine window that stops gracefully on an abort). */
export function isListened(signal: AbortSignal): boolean {
  return getEventListeners(signal, 'abort').length > 0;
}
