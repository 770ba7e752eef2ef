import { KubeApiError } from './client.js';

/** Tries of one read-modify-write before a write conflict is the caller's error. */
export const CONFLICT_TRIES = 6;

/**
 * Runs a read-modify-write until it is not met by 409 Conflict: another writer (an operator's status or defaults, a
 * controller) wrote the object between our read and our write. `attempt` must read the object again each time; only
 * a conflict is retried, every other error is the caller's at once.
 */
export async function retryOnConflict<T>(attempt: (n: number) => Promise<T>, tries = CONFLICT_TRIES): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      return await attempt(n);
    } catch (err) {
      if (!(err instanceof KubeApiError && err.conflict) || n >= tries) throw err;
    }
  }
}
