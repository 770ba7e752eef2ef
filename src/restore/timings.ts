/**
 * Where a restore spends its time, phase by phase (milliseconds), so `-v`, `-o json` and bench/restore.ts can
 * show it. While planning, objects are planned concurrently, so cluster reads, schema checks and comparisons
 * interleave; each phase is wall time during which it was going on, and `plan` is what planning spent besides.
 */
import { performance } from 'node:perf_hooks';

export type RestorePhase =
  /** Reading, checksumming and parsing the bundle's files. */
  | 'readBundle'
  /** Cluster reads for the plan: identity, CRDs, discovery, operator, one paged list per custom resource type. */
  | 'readCluster'
  /** Checking each object against its CRD's schema (and pruning with --drop-unknown-fields). */
  | 'schemaCheck'
  /** Comparing bundle and live objects, building diffs, ordering the plan. */
  | 'plan'
  /** Dry run only: the API server's own dry run of each write. */
  | 'serverDryRun'
  /** Waiting for the answer to the preview (not restore work; part of `total`). */
  | 'confirm'
  /** Creating the missing CRDs from the bundle and waiting until they are Established. */
  | 'createCrds'
  /** Pausing the operator, locking the datastore, and putting both back. */
  | 'guards'
  /** Creating / updating / replacing the objects. */
  | 'write'
  /** Deleting objects the bundle does not have (--prune). */
  | 'prune'
  /** Waiting for a teardown in progress to finish (before writing), and for the resumed operator's reports. */
  | 'operator'
  /** Re-reading what was written to report drift. */
  | 'driftCheck';

export type RestoreTimings = Partial<Record<RestorePhase | 'total', number>>;

export class PhaseTimer {
  private readonly ms: RestoreTimings = {};
  private readonly active = new Map<RestorePhase, { count: number; since: number }>();
  private readonly started = performance.now();

  add(phase: RestorePhase, ms: number): void {
    this.ms[phase] = (this.ms[phase] ?? 0) + ms;
  }

  /**
   * Time an async step as one phase. Steps of one phase that run concurrently count once (the wall time during
   * which at least one was in flight), so a phase never adds up to more than the time that passed.
   */
  async time<T>(phase: RestorePhase, fn: () => Promise<T> | T): Promise<T> {
    const a = this.active.get(phase) ?? { count: 0, since: 0 };
    if (a.count++ === 0) a.since = performance.now();
    this.active.set(phase, a);
    try {
      return await fn();
    } finally {
      if (--a.count === 0) this.add(phase, performance.now() - a.since);
    }
  }

  /** Time synchronous work done inside concurrent tasks (it cannot overlap, so the sum is wall time). */
  sync<T>(phase: RestorePhase, fn: () => T): T {
    const t0 = performance.now();
    try {
      return fn();
    } finally {
      this.add(phase, performance.now() - t0);
    }
  }

  /** Milliseconds spent in a phase so far (finished steps only). */
  spent(phase: RestorePhase): number {
    return this.ms[phase] ?? 0;
  }

  /** Whole milliseconds per phase, plus `total` since the timer was made. */
  result(): RestoreTimings {
    const out: RestoreTimings = {};
    for (const [k, v] of Object.entries(this.ms)) out[k as RestorePhase] = Math.round(v);
    out.total = Math.round(performance.now() - this.started);
    return out;
  }
}
