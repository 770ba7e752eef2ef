/**
 * Carrying a restore plan out: the CRDs the cluster lacks, then the operator paused, then phase by phase (the
 * datastore lock held for pools and IPAM), then --prune; the guards are always put back, then what was written
 * is read back (read-back.ts).
 */
import { performance } from 'node:perf_hooks';
import { CALICO_CRD_GROUP, OPERATOR_GROUP } from '../calico/knowledge.js';
import { errorMessage } from '../core/errors.js';
import { whenAborted } from '../io/abort.js';
import type { Reporter } from '../io/host.js';
import { K } from '../kube/builtin.js';
import type { KubeClient } from '../kube/client.js';
import { waitCrdsEstablished } from '../kube/manifests.js';
import { pool } from '../util/pool.js';
import { ResourceResolver } from '../kube/resolver.js';
import { groupOf, type KubeObject, type ResourceType } from '../kube/types.js';
import { lockDatastore, pauseOperator, recordedPrior, releaseAll, type Release } from './guards.js';
import { stripServerFields } from './normalize.js';
import { clearReports, judgeOperator } from './operator.js';
import { CLUSTER_INFORMATION, INSTALLATION_KIND, INSTALLATION_NAME, OTHER_PHASE, RESTORE_PHASES } from './order.js';
import { readBack } from './read-back.js';
import { OwnerLookup, relinkOwners, releaseFromGoneOwners } from './owners.js';
import { extendPlan, type PlanTable } from './plan-table.js';
import { PhaseTimer } from './timings.js';
import {
  DEFAULT_RESTORE_CONCURRENCY,
  NOT_RESTORED,
  WRITES,
  desiredOf,
  hasDesired,
  setDesired,
  type Planned,
  type RestoreOptions,
  type RestorePlan,
  type RestoreResult,
} from './types.js';
import { pastTense, writeOne } from './write.js';

const CI_TYPE: ResourceType = { group: CALICO_CRD_GROUP, version: 'v1', plural: 'clusterinformations', kind: CLUSTER_INFORMATION.kind, namespaced: false };

/** One execution's shared state: what it changed to put back, and whether it was told to stop. */
interface Execution {
  client: KubeClient;
  resolver: ResourceResolver;
  /** Owners' UIDs, the ones this run writes included (references are re-linked to them). */
  owners: OwnerLookup;
  reporter: Reporter;
  timer: PhaseTimer;
  concurrency: number;
  releases: Release[];
  paused: string[];
  /** The operator was paused (and is judged by its reports once resumed). */
  operatorPaused?: boolean;
  /** Set when the caller's signal aborts: nothing more is written. */
  interrupted?: string;
}

export async function executeRestore(
  client: KubeClient,
  plan: RestorePlan,
  planned: PlanTable,
  bundleCrds: Map<string, KubeObject>,
  opts: RestoreOptions,
  reporter: Reporter,
  timer = new PhaseTimer(),
): Promise<RestoreResult> {
  const resolver = new ResourceResolver(client);
  const ex: Execution = {
    client,
    resolver,
    owners: new OwnerLookup(client, resolver),
    reporter,
    timer,
    concurrency: opts.concurrency ?? DEFAULT_RESTORE_CONCURRENCY,
    releases: [],
    paused: [],
  };
  // First of all, before a CRD is created (owners.ts): what the garbage collector would delete is kept from it.
  // Entries with gone owners have a note, so they are kept as objects (plan-table.ts).
  const released = await timer.time('guards', () => releaseFromGoneOwners(client, ex.resolver, ex.owners, planned.kept(), reporter));
  const writes = planned.where((i) => WRITES.has(planned.kindAt(i)));
  const lockPrior = await prepareDatastoreLock(ex, plan, planned, writes);
  let releaseProblems: string[] = [];
  if (writes.length || plan.crdsToCreate.length || released.length || lockPrior.heldBefore) {
    // Stopped while writing: finish the writes in flight, write nothing more, put the operator and the datastore
    // lock back, and report what was left.
    const stopListening = whenAborted(opts.signal, (why) => {
      ex.interrupted = why;
      reporter.warn('CNR_RESTORE_INTERRUPTED', `${why}: stopping after the writes in flight, then putting the operator and the datastore lock back`);
    });
    try {
      await createMissingCrds(ex, plan, bundleCrds);
      await pauseTheOperator(ex, plan.operatorReports);
      await writePhases(ex, planned, writes, lockPrior);
      await linkToRestoredOwners(ex, released, planned);
      await prune(ex, planned, writes);
    } finally {
      releaseProblems = await timer.time('guards', () => releaseAll(ex.releases, reporter));
      stopListening();
    }
  }
  // The operator's own word on what it made of the restore, before the read-back so drift includes its rewrites.
  const operator = ex.operatorPaused && !releaseProblems.length ? await timer.time('operator', () => judgeResumed(ex, plan, planned, opts)) : undefined;
  const result = await readBack(ex.client, ex.resolver, plan, planned, writes, { paused: ex.paused, releaseProblems }, ex.concurrency, reporter, timer);
  if (!operator) return result;
  return extendPlan(result, { operator, ok: result.ok && !operator.problem });
}

function judgeResumed(ex: Execution, plan: RestorePlan, planned: PlanTable, opts: RestoreOptions): Promise<{ checked: string[]; problem?: string }> {
  // The Installation is expected back only when this restore put it there or found it as in the bundle: one it did
  // not write (blocked, refused, failed) is reported as such already, and waiting for it would only delay exit 3.
  const installation = planned
    .where((i) => planned.headAt(i).kind === INSTALLATION_KIND)
    .some((i) => {
      const ref = planned.refAt(i);
      return (
        ref.name === INSTALLATION_NAME &&
        groupOf(ref.apiVersion) === OPERATOR_GROUP &&
        !NOT_RESTORED.has(planned.kindAt(i)) &&
        planned.outcomeAt(i) !== 'failed'
      );
    });
  return judgeOperator(ex.client, plan.operatorReports, installation, ex.reporter, opts.operatorTimeoutMs);
}

/**
 * The datastore lock's prior value. A ClusterInformation this run creates is created already locked when IPAM
 * will be written, so Calico never sees datastoreReady=true with IPAM half-restored; the lock is released to the
 * bundle's value.
 */
async function prepareDatastoreLock(
  ex: Execution,
  plan: RestorePlan,
  planned: PlanTable,
  writes: number[],
): Promise<{ prior: boolean | undefined; heldBefore: boolean }> {
  const ciBefore = plan.crdsToCreate.includes(`clusterinformations.${CALICO_CRD_GROUP}`)
    ? undefined
    : await ex.timer.time('guards', () => ex.client.getOrUndefined(CI_TYPE, undefined, CLUSTER_INFORMATION.name).catch(() => undefined));
  const lockedPhases = new Set(RESTORE_PHASES.filter((ph) => ph.datastoreLock).map((ph) => ph.id));
  const ipamWrites = writes.some((i) => lockedPhases.has(planned.phaseAt(i)) && planned.kindAt(i) !== 'prune');
  const ciAt = writes.find(
    (i) =>
      planned.kindAt(i) === 'create' &&
      planned.headAt(i).kind === CLUSTER_INFORMATION.kind &&
      planned.refAt(i).name === CLUSTER_INFORMATION.name &&
      hasDesired(planned.get(i)),
  );
  const ciCreate = ciAt === undefined ? undefined : planned.get(ciAt);
  // Locked before this plan was made (a teardown let finish, operator.ts): the value recorded then is the prior one,
  // and that lock is released at the end even when this plan writes nothing under the lock (writePhases).
  const recorded = recordedPrior(ciBefore);
  if (recorded) return { prior: recorded.value, heldBefore: true };
  if (!(ipamWrites && ciCreate)) return { prior: ciBefore ? (ciBefore.spec?.datastoreReady as boolean | undefined) : undefined, heldBefore: false };
  const ci = desiredOf(ciCreate);
  setDesired(ciCreate, { ...ci, spec: { ...ci.spec, datastoreReady: false } });
  planned.set(ciAt!, ciCreate);
  return { prior: ci.spec?.datastoreReady as boolean | undefined, heldBefore: false };
}

/** 1. CRDs missing from the cluster, from the bundle, until Established. */
async function createMissingCrds(ex: Execution, plan: RestorePlan, bundleCrds: Map<string, KubeObject>): Promise<void> {
  await createCrds(ex.client, plan.crdsToCreate, bundleCrds, ex.reporter, ex.timer);
  ex.resolver.forget();
}

/** Creates the named CRDs from the bundle and waits until they are Established. */
export async function createCrds(
  client: KubeClient,
  names: string[],
  bundleCrds: Map<string, KubeObject>,
  reporter: Reporter,
  timer: PhaseTimer,
): Promise<void> {
  if (!names.length) return;
  const crds = [...bundleCrds.values()].filter((c) => names.includes(c.metadata.name));
  reporter.info('CNR_RESTORE_CRDS', `creating ${crds.length} CRD(s) from the bundle: ${names.join(', ')}`);
  await timer.time('createCrds', async () => {
    await pool(crds, 4, async (c) => {
      const body = stripServerFields(c);
      await client.create(K.crd, body);
    });
    await waitCrdsEstablished(client, names);
  });
}

/**
 * 2. Keep the operator from rewriting what we write; its last reports go, so what it reports after is its own.
 * An operator that was already stopped (apply's restore steps run with the operator at 0 replicas, and apply
 * resumes and judges it itself) is not judged here: nothing would report before the restore ends.
 */
async function pauseTheOperator(ex: Execution, reports: string[]): Promise<void> {
  const op = await ex.timer.time('guards', () => pauseOperator(ex.client, ex.reporter));
  if (op) {
    ex.releases.push(op);
    ex.paused.push(op.what);
    ex.operatorPaused = op.wasRunning;
    if (op.wasRunning) await ex.timer.time('guards', () => clearReports(ex.client, reports));
  }
}

/** 3. Phase by phase; within a phase kind by kind (rank), objects of one kind in parallel. */
async function writePhases(ex: Execution, planned: PlanTable, writes: number[], lockPrior: { prior: boolean | undefined; heldBefore: boolean }): Promise<void> {
  const progress = { done: 0, total: writes.filter((i) => planned.kindAt(i) !== 'prune').length };
  let locked = false;
  for (const phase of [...RESTORE_PHASES, OTHER_PHASE]) {
    const inPhase = writes.filter((i) => planned.phaseAt(i) === phase.id && planned.kindAt(i) !== 'prune');
    if (!inPhase.length) continue;
    if (phase.datastoreLock && !locked) {
      locked = true; // taken once, for every locked phase (pools, then IPAM), released at the end
      await takeDatastoreLock(ex, lockPrior.prior);
    }
    ex.reporter.info('CNR_RESTORE_PHASE', `restoring ${phase.title} (${inPhase.length} object(s))`, { phase: phase.id, count: inPhase.length });
    const ranks = [...new Set(inPhase.map((i) => planned.rankAt(i)))].sort((a, b) => a - b);
    for (const rank of ranks) {
      await ex.timer.time('write', () =>
        pool(
          inPhase.filter((i) => planned.rankAt(i) === rank),
          ex.concurrency,
          async (i) => {
            // Built for this write and put back with its outcome (a row again when it has nothing more to say).
            const p = planned.get(i);
            if (ex.interrupted) {
              p.action.outcome = 'failed';
              p.action.error = `not written: restore interrupted (${ex.interrupted})`;
            } else {
              await writeEntry(ex, p);
              ex.reporter.progress({ id: 'restore', label: 'restoring objects', current: ++progress.done, total: progress.total });
            }
            planned.set(i, p);
          },
        ),
      );
    }
  }
  if (progress.total) ex.reporter.progress({ id: 'restore', label: 'restoring objects', current: progress.done, total: progress.total, done: true });
  // The teardown's lock (operator.ts writeTeardownNeeds) is this restore's to release, whatever it wrote: with nothing
  // written under the lock it would stay, and every CNI ADD and DEL would fail ("Calico is currently not ready").
  if (lockPrior.heldBefore && !locked) await takeDatastoreLock(ex, lockPrior.prior);
}

/** Locks the datastore (guards.ts) and registers its release with the restore's other releases. */
async function takeDatastoreLock(ex: Execution, prior: boolean | undefined): Promise<void> {
  const lock = await ex.timer.time('guards', () => lockDatastore(ex.client, CI_TYPE, ex.reporter, prior));
  if (lock) {
    ex.releases.push(lock);
    ex.paused.push(lock.what);
  }
}

/** Writes one entry and records its outcome; a failure is reported and recorded, never thrown. */
async function writeEntry(ex: Execution, p: Planned): Promise<void> {
  try {
    await writeOne(ex.client, ex.resolver, p, ex.owners, ex.reporter);
    p.action.outcome = 'done';
    ex.reporter.info('CNR_RESTORE_OBJECT', `${pastTense(p.action.action)} ${p.action.id}`, { id: p.action.id, action: p.action.action });
  } catch (err) {
    p.action.outcome = 'failed';
    p.action.error = errorMessage(err);
    ex.reporter.error('CNR_RESTORE_OBJECT_FAILED', `${p.action.id}: ${p.action.action} failed: ${p.action.error}`, {
      id: p.action.id,
      action: p.action.action,
    });
  }
}

/** 3b. Owners restored after what they own (config before the operator's resources): linked now, the operator still paused. */
async function linkToRestoredOwners(ex: Execution, released: Planned[], planned: PlanTable): Promise<void> {
  if (ex.interrupted) return;
  // Written before its owner: such an entry is kept as an object (plan-table.ts).
  const pending = planned.kept().filter((p) => WRITES.has(p.action.action) && p.ownerPending && p.action.outcome === 'done');
  const entries = [...new Set([...released.filter((p) => p.action.outcome !== 'failed'), ...pending])];
  if (!entries.length) return;
  ex.resolver.forget();
  await ex.timer.time('write', () => relinkOwners(ex.client, ex.resolver, ex.owners, entries, ex.reporter));
}

/** 4. Prune last, most dependent kinds first. */
async function prune(ex: Execution, planned: PlanTable, writes: number[]): Promise<void> {
  // A prune has a reason and its live object: kept as an object, changed in place.
  const prunes = writes.filter((i) => planned.kindAt(i) === 'prune').map((i) => planned.get(i));
  const pruneStart = performance.now();
  for (const p of prunes) {
    if (ex.interrupted) {
      p.action.outcome = 'failed';
      p.action.error = `not pruned: restore interrupted (${ex.interrupted})`;
      continue;
    }
    try {
      await ex.client.delete(p.type!, p.live!.metadata.namespace, p.live!.metadata.name);
      p.action.outcome = 'done';
      ex.reporter.info('CNR_RESTORE_OBJECT', `pruned ${p.action.id}`, { id: p.action.id, action: 'prune' });
    } catch (err) {
      p.action.outcome = 'failed';
      p.action.error = errorMessage(err);
      ex.reporter.error('CNR_RESTORE_OBJECT_FAILED', `${p.action.id}: prune failed: ${p.action.error}`);
    }
  }
  if (prunes.length) ex.timer.add('prune', performance.now() - pruneStart);
}
