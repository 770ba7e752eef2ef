/**
 * Polls a condition until it holds or a deadline passes, for the tests that watch something other than the API
 * (a driver's event log, a journal, a child process). A timeout names the wait, how long it lasted and, from
 * `state`, what held it: "timed out waiting for X" alone sent every failure back to a re-run under a debugger.
 */
export interface UntilOptions {
  timeoutMs?: number;
  intervalMs?: number;
  /** What the wait saw last (an object's state, a log's end); read once, at the timeout. */
  state?: () => string | Promise<string>;
}

export async function until(what: string, cond: () => boolean | Promise<boolean>, opts: UntilOptions = {}): Promise<void> {
  const started = Date.now();
  const deadline = started + (opts.timeoutMs ?? 120_000);
  while (!(await cond())) {
    if (Date.now() > deadline) {
      const state = opts.state ? await Promise.resolve(opts.state()).catch((e: Error) => `(state unreadable: ${e.message})`) : '';
      throw new Error(`timed out after ${((Date.now() - started) / 1000).toFixed(1)} s waiting for ${what}${state ? `\n${state}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 25));
  }
}
