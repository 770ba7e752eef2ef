/**
 * The end-to-end files run in parallel, each on the cluster of the vitest worker slot it runs in, so no two files
 * ever share a cluster's mutable state (Calico objects, nodes, the supervisor's programs, port offsets). Slot 1 is
 * the instance `npm run cluster -- up` starts (name `e2e`, ports from 16443), so a developer's running cluster is
 * reused by a one-file run; slot N is `e2e-N` with its own port block and loopback Service range.
 */
import os from 'node:os';

/** How many end-to-end files run at once (one cluster each). */
export function e2eWorkers(): number {
  const forced = Number(process.env.CNI_REWIND_E2E_WORKERS);
  if (Number.isInteger(forced) && forced >= 1) return forced;
  // Most of an e2e file's time is spent waiting on real programs' timers, not on the CPU: two files per core, and
  // about 4 GiB of memory per cluster (control plane, Calico's programs, the worker, the CLI it runs).
  const byCores = os.availableParallelism() * 2;
  const byMemory = Math.floor(os.totalmem() / 4 / 1024 ** 3);
  return Math.max(1, Math.min(byCores, byMemory, 6));
}

export interface SlotCluster {
  slot: number;
  name: string;
  portBase: number;
}

/** Each slot's block of 100 ports keeps `portBase % 256` distinct too (it picks the loopback Service /24). */
const PORT_STRIDE = 100;

/** Slot 1's name and port base: `CNI_REWIND_CLUSTER_NAME` / `CNI_REWIND_E2E_PORT_BASE` as the run started, else e2e/16443. */
export interface SlotBase {
  name: string;
  portBase: number;
}

export function slotBaseFromEnv(env: NodeJS.ProcessEnv = process.env): SlotBase {
  return { name: env.CNI_REWIND_CLUSTER_NAME || 'e2e', portBase: Number(env.CNI_REWIND_E2E_PORT_BASE || 16443) };
}

export function slotCluster(slot: number, base: SlotBase): SlotCluster {
  return { slot, name: slot === 1 ? base.name : `${base.name}-${slot}`, portBase: base.portBase + (slot - 1) * PORT_STRIDE };
}

/** The slot of the vitest worker running this file: vitest numbers its concurrent workers 1..maxWorkers. */
export function currentSlot(): number {
  const id = Number(process.env.VITEST_POOL_ID ?? 1);
  if (!Number.isInteger(id) || id < 1) throw new Error(`VITEST_POOL_ID is ${process.env.VITEST_POOL_ID}: not a vitest worker`);
  return id;
}
