/**
 * One poller per region for every snapshot being waited on, whatever node it belongs to.
 *
 * A backup waits for each node's snapshots concurrently. With one SDK waiter per node, 200 nodes meant 200 pollers
 * each calling DescribeSnapshots every poll interval: EC2 throttles that, and the calls grew with the nodes. Here
 * every waiter registers its snapshot ids with the region's watcher, which asks DescribeSnapshots about all of them
 * at once (up to 200 ids a call) every poll interval, and hands each waiter its states once they are all final.
 */
import type { Snapshot } from '@aws-sdk/client-ec2';
import { sleep } from '../../src/provider-kit/index.js';

/** Describe these snapshot ids; ids missing from the answer no longer exist. */
export type DescribeSnapshots = (ids: string[]) => Promise<Map<string, Snapshot>>;

interface Waiter {
  ids: string[];
  deadline: number;
  onUpdate?: (states: Map<string, Snapshot>) => void;
  resolve(states: Map<string, Snapshot>): void;
  reject(err: unknown): void;
}

/** Final: completed, failed, or gone (a missing snapshot never becomes usable). */
const isFinal = (s: Snapshot | undefined) => !s || s.State === 'completed' || s.State === 'error';

export class SnapshotWatcher {
  private readonly waiters = new Set<Waiter>();
  private running = false;
  /** DescribeSnapshots calls made (for the fan-out benchmark and tests). */
  polls = 0;

  constructor(
    private readonly describe: DescribeSnapshots,
    private readonly pollMs: number,
  ) {}

  /**
   * Resolves with the latest state of each id once every one is final, or at the deadline with whatever they are
   * then (the caller decides what a pending snapshot means). Rejects when DescribeSnapshots fails.
   */
  wait(ids: string[], deadline: number, onUpdate?: (states: Map<string, Snapshot>) => void): Promise<Map<string, Snapshot>> {
    return new Promise((resolve, reject) => {
      this.waiters.add({ ids, deadline, onUpdate, resolve, reject });
      if (!this.running) void this.run();
    });
  }

  private async run(): Promise<void> {
    this.running = true;
    try {
      // The first poll is immediate (a snapshot may already be complete); later waiters join the next poll.
      while (this.waiters.size) {
        const batch = [...this.waiters];
        let states: Map<string, Snapshot>;
        try {
          this.polls++;
          states = await this.describe([...new Set(batch.flatMap((w) => w.ids))]);
        } catch (err) {
          for (const w of batch) this.settle(w, () => w.reject(err));
          continue;
        }
        const now = Date.now();
        for (const w of batch) {
          const mine = new Map<string, Snapshot>();
          for (const id of w.ids) if (states.has(id)) mine.set(id, states.get(id)!);
          w.onUpdate?.(mine);
          if (w.ids.every((id) => isFinal(mine.get(id))) || now >= w.deadline) this.settle(w, () => w.resolve(mine));
        }
        if (!this.waiters.size) break;
        const nextDeadline = Math.min(...[...this.waiters].map((w) => w.deadline));
        await sleep(Math.max(0, Math.min(this.pollMs, nextDeadline - Date.now())));
      }
    } finally {
      this.running = false;
    }
  }

  private settle(w: Waiter, fn: () => void): void {
    this.waiters.delete(w);
    fn();
  }
}
