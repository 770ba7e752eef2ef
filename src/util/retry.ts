/** Retry policy shared by the Kubernetes client and the providers: exponential backoff with jitter. */
export interface RetryPolicy {
  /** Total time budget for one call, including waits (ms). */
  maxElapsedMs: number;
  initialDelayMs: number;
  maxDelayMs: number;
}

/** CNI_REWIND_KUBE_RETRY_MS bounds how long one call keeps retrying (default 60 s: enough for an API server restart). */
export const defaultRetryPolicy: RetryPolicy = {
  maxElapsedMs: Number(process.env.CNI_REWIND_KUBE_RETRY_MS ?? 60_000),
  initialDelayMs: 250,
  maxDelayMs: 8_000,
};

export function backoffDelay(attempt: number, policy: RetryPolicy, retryAfterMs?: number): number {
  if (retryAfterMs !== undefined && retryAfterMs >= 0) return Math.min(retryAfterMs, policy.maxDelayMs);
  const exp = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** attempt);
  // Full jitter keeps many concurrent callers from retrying in lock-step.
  return Math.round(exp / 2 + Math.random() * (exp / 2));
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Run `fn` until it succeeds, `isRetryable` says no, or the time budget is spent.
 * `onRetry` is told about each retry (for progress and for counting throttles).
 */
export async function withRetry<T>(
  fn: (attempt: number) => Promise<T>,
  isRetryable: (err: unknown) => { retry: boolean; afterMs?: number },
  policy: RetryPolicy = defaultRetryPolicy,
  onRetry?: (err: unknown, attempt: number, delayMs: number) => void,
): Promise<T> {
  const start = Date.now();
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (err) {
      const verdict = isRetryable(err);
      if (!verdict.retry) throw err;
      const delay = backoffDelay(attempt, policy, verdict.afterMs);
      if (Date.now() - start + delay > policy.maxElapsedMs) throw err;
      onRetry?.(err, attempt, delay);
      await sleep(delay);
    }
  }
}
