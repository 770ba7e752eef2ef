/**
 * After the writes: re-read what was written (someone else, a controller or a person, may have changed it
 * meanwhile) and sum the restore up: every object that is not as in the bundle, with the reason.
 */
import type { Reporter } from '../io/host.js';
import type { KubeClient } from '../kube/client.js';
import type { ResourceResolver } from '../kube/resolver.js';
import { allocatesAnyOf, inUseAddresses, podAddressesVsPools } from '../doctor/checks/ipam.js';
import { KubeApiError } from '../kube/client.js';
import type { KubeObject } from '../kube/types.js';
import { loadLiveState, runChecks } from '../doctor/doctor.js';
import { KEYS } from '../doctor/state.js';
import { findDrift, type DriftSource, type DriftTarget } from './drift.js';
import { isIpamLive } from './ipam.js';
import type { PhaseTimer } from './timings.js';
import { IPAM_TYPES } from '../calico/ipam-types.js';
import { extendPlan, type PlanTable } from './plan-table.js';
import { NOT_RESTORED, desiredOf, type Planned, type RestoreAction, type RestorePlan, type RestoreResult } from './types.js';

/**
 * A written entry as the drift check sees it. A class, so its getter is shared: 100,000 object literals with a
 * getter of their own took 45 MiB more (measured on the read-back of 100,000 IPAM handles).
 */
class WrittenEntry implements DriftTarget {
  constructor(private readonly p: Planned) {}
  get action() {
    return this.p.action;
  }
  get written() {
    return this.p.written;
  }
  get ref() {
    return this.p.action.ref;
  }
  get type() {
    return this.p.type;
  }
  get desired() {
    return desiredOf(this.p);
  }
}

/** 5. Re-read what was written, then the result of the restore. */
export async function readBack(
  client: KubeClient,
  resolver: ResourceResolver,
  plan: RestorePlan,
  planned: PlanTable,
  writes: number[],
  guards: RestoreResult['guards'],
  concurrency: number,
  reporter: Reporter,
  timer: PhaseTimer,
): Promise<RestoreResult> {
  // A write that turned into a skip (an IPAM handle whose address was taken meanwhile, ipam-write.ts) wrote nothing.
  const written = writes.filter((i) => planned.outcomeAt(i) === 'done' && planned.kindAt(i) !== 'prune' && planned.kindAt(i) !== 'skip');
  // Each entry built where it is compared and put back with what the comparison found (plan-table.ts).
  const building = new Map<number, Planned>();
  const targets: DriftSource = {
    size: written.length,
    ref: (k) => planned.refAt(written[k]!),
    target: (k) => {
      const p = planned.get(written[k]!);
      building.set(k, p);
      return new WrittenEntry(p);
    },
    compared: (k) => {
      planned.set(written[k]!, building.get(k)!);
      building.delete(k);
    },
  };
  const drifted = await timer.time('driftCheck', () => findDrift(client, resolver, targets, concurrency, reporter));
  // A failure, a refusal and a duplicate IP each come with a reason: all are entries kept as objects.
  const kept = planned.kept().map((p) => p.action);
  const failures = kept
    .filter((a) => a.outcome === 'failed' || NOT_RESTORED.has(a.action))
    .map((a) => ({ id: a.id, action: a.action, reason: a.error ?? a.reason ?? 'failed' }));
  const ipamProblems = [...duplicateIps(kept), ...(await timer.time('driftCheck', () => unallocatedPodIps(client, planned)))];
  return extendPlan(plan, {
    counts: planned.counts(),
    failures,
    drifted,
    guards,
    ...(ipamProblems.length ? { ipamProblems } : {}),
    ok: failures.length === 0 && drifted.length === 0 && guards.releaseProblems.length === 0 && ipamProblems.length === 0,
    timings: timer.result(),
  });
}

/** A dry run's result: `ok` tells whether a real run would restore everything (planning and the server's dry run). */
export function dryRunResult(plan: RestorePlan, planned: PlanTable, timer: PhaseTimer): RestoreResult {
  const kept = planned.kept().map((p) => p.action);
  const failures = kept
    .filter((a) => NOT_RESTORED.has(a.action) || a.serverDryRunError)
    .map((a) => ({ id: a.id, action: a.action, reason: a.serverDryRunError ? `the API server would refuse it: ${a.serverDryRunError}` : (a.reason ?? '') }));
  const ipamProblems = duplicateIps(kept);
  return extendPlan(plan, {
    failures,
    drifted: [],
    guards: { paused: [], releaseProblems: [] },
    ...(ipamProblems.length ? { ipamProblems } : {}),
    ok: failures.length === 0 && ipamProblems.length === 0,
    timings: timer.result(),
  });
}

/** The duplicate IPs the IPAM merge met (ipam-merge.ts), one line each. */
const duplicateIps = (actions: RestoreAction[]): string[] => actions.flatMap((a) => (a.ipam?.duplicates ?? []).map((d) => `${a.id}: ${d}`));

/**
 * After the lock is released: every address a pod or a node tunnel uses inside a pool that IPAM does not hold (the
 * doctor's `pod-ip-not-allocated` check), when the restore touched IPAM. Each is an address IPAM will hand out again.
 */
async function unallocatedPodIps(client: KubeClient, planned: PlanTable): Promise<string[]> {
  if (!planned.where((i) => isIpamLive(planned.headAt(i))).length) return [];
  // Pools, pods and nodes: the one check's input, not the whole cluster a second time (the drift check read what was
  // written; a restore of 100k handles would list them all again). Of the blocks, only those that allocate an
  // address in use, read a page at a time: the others cannot change the finding, and 100k handles' 1,563 blocks held
  // at once took the heap from 30 to 44 MB at the very end of the restore.
  const state = await loadLiveState(client, [KEYS.ipPools]);
  state.objects[KEYS.ipamBlocks] = await blocksAllocating(client, new Set(inUseAddresses(state.pods ?? [], state.nodes ?? []).keys()));
  const found = runChecks(state, { checks: [podAddressesVsPools] }).find((f) => f.id === 'pod-ip-not-allocated');
  return (found?.objects ?? []).map(
    (o) => `${o}: in use, but IPAM holds no allocation for it (pod-ip-not-allocated); restart it so it gets an address IPAM knows`,
  );
}

const IPAM_BLOCK = IPAM_TYPES.block;
/** Blocks per list request: a block of 64 allocations with their attributes is kilobytes. */
const BLOCK_PAGE = 100;

/** The IPAM blocks that allocate any of `addresses` (none read when nothing is in use). */
async function blocksAllocating(client: KubeClient, addresses: ReadonlySet<string>): Promise<KubeObject[]> {
  const kept: KubeObject[] = [];
  if (!addresses.size) return kept;
  try {
    for await (const page of client.listPages(IPAM_BLOCK, { limit: BLOCK_PAGE })) for (const b of page.items) if (allocatesAnyOf(b, addresses)) kept.push(b);
  } catch (err) {
    // No IPAMBlock CRD: no block allocates anything.
    if (!(err instanceof KubeApiError && err.notFound)) throw err;
  }
  return kept;
}
