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
  if (signal.aborted) {
    fn(abortReason(signal));
    return () => undefined;
  }
  const listener = () => fn(abortReason(signal));
  signal.addEventListener('abort', listener, { once: true });
  return () => signal.removeEventListener('abort', listener);
}
