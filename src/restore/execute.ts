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
  planned: Planned[],
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
  const released = await timer.time('guards', () => releaseFromGoneOwners(client, ex.resolver, ex.owners, planned, reporter));
  const writes = planned.filter((p) => WRITES.has(p.action.action));
  const lockPrior = await prepareDatastoreLock(ex, plan, writes);
  let releaseProblems: string[] = [];
  if (writes.length || plan.crdsToCreate.length || released.length) {
    // Stopped while writing: finish the writes in flight, write nothing more, put the operator and the datastore
    // lock back, and report what was left.
    const stopListening = whenAborted(opts.signal, (why) => {
      ex.interrupted = why;
      reporter.warn('CNR_RESTORE_INTERRUPTED', `${why}: stopping after the writes in flight, then putting the operator and the datastore lock back`);
    });
    try {
      await createMissingCrds(ex, plan, bundleCrds);
      await pauseTheOperator(ex, plan.operatorReports);
      await writePhases(ex, writes, lockPrior);
      await linkToRestoredOwners(ex, released, writes);
      await prune(ex, writes);
    } finally {
      releaseProblems = await timer.time('guards', () => releaseAll(ex.releases, reporter));
      stopListening();
    }
  }
  // The operator's own word on what it made of the restore, before the read-back so drift includes its rewrites.
  const operator = ex.operatorPaused && !releaseProblems.length ? await timer.time('operator', () => judgeResumed(ex, plan, opts)) : undefined;
  const result = await readBack(ex.client, ex.resolver, plan, writes, { paused: ex.paused, releaseProblems }, ex.concurrency, reporter, timer);
  if (!operator) return result;
  return { ...result, operator, ok: result.ok && !operator.problem };
}

function judgeResumed(ex: Execution, plan: RestorePlan, opts: RestoreOptions): Promise<{ checked: string[]; problem?: string }> {
  // The Installation is expected back only when this restore put it there or found it as in the bundle: one it did
  // not write (blocked, refused, failed) is reported as such already, and waiting for it would only delay exit 3.
  const installation = plan.actions.some(
    (a) =>
      a.ref.kind === INSTALLATION_KIND &&
      a.ref.name === INSTALLATION_NAME &&
      groupOf(a.ref.apiVersion) === OPERATOR_GROUP &&
      !NOT_RESTORED.has(a.action) &&
      a.outcome !== 'failed',
  );
  return judgeOperator(ex.client, plan.operatorReports, installation, ex.reporter, opts.operatorTimeoutMs);
}

/**
 * The datastore lock's prior value. A ClusterInformation this run creates is created already locked when IPAM
 * will be written, so Calico never sees datastoreReady=true with IPAM half-restored; the lock is released to the
 * bundle's value.
 */
async function prepareDatastoreLock(ex: Execution, plan: RestorePlan, writes: Planned[]): Promise<boolean | undefined> {
  const ciBefore = plan.crdsToCreate.includes(`clusterinformations.${CALICO_CRD_GROUP}`)
    ? undefined
    : await ex.timer.time('guards', () => ex.client.getOrUndefined(CI_TYPE, undefined, CLUSTER_INFORMATION.name).catch(() => undefined));
  const ipamWrites = writes.some((p) => RESTORE_PHASES.find((ph) => ph.id === p.action.phase)?.datastoreLock && p.action.action !== 'prune');
  const ciCreate = writes.find(
    (p) => p.action.action === 'create' && p.action.ref.kind === CLUSTER_INFORMATION.kind && p.action.ref.name === CLUSTER_INFORMATION.name && hasDesired(p),
  );
  // Locked before this plan was made (a teardown let finish, operator.ts): the value recorded then is the prior one.
  const recorded = recordedPrior(ciBefore);
  if (recorded) return recorded.value;
  if (!(ipamWrites && ciCreate)) return ciBefore ? (ciBefore.spec?.datastoreReady as boolean | undefined) : undefined;
  const ci = desiredOf(ciCreate);
  setDesired(ciCreate, { ...ci, spec: { ...ci.spec, datastoreReady: false } });
  return ci.spec?.datastoreReady as boolean | undefined;
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
async function writePhases(ex: Execution, writes: Planned[], lockPrior: boolean | undefined): Promise<void> {
  const progress = { done: 0, total: writes.filter((p) => p.action.action !== 'prune').length };
  let locked = false;
  for (const phase of [...RESTORE_PHASES, OTHER_PHASE]) {
    const inPhase = writes.filter((p) => p.action.phase === phase.id && p.action.action !== 'prune');
    if (!inPhase.length) continue;
    if (phase.datastoreLock && !locked) {
      locked = true; // taken once, for every locked phase (pools, then IPAM), released at the end
      const lock = await ex.timer.time('guards', () => lockDatastore(ex.client, CI_TYPE, ex.reporter, lockPrior));
      if (lock) {
        ex.releases.push(lock);
        ex.paused.push(lock.what);
      }
    }
    ex.reporter.info('CNR_RESTORE_PHASE', `restoring ${phase.title} (${inPhase.length} object(s))`, { phase: phase.id, count: inPhase.length });
    const ranks = [...new Set(inPhase.map((p) => p.rank))].sort((a, b) => a - b);
    for (const rank of ranks) {
      await ex.timer.time('write', () =>
        pool(
          inPhase.filter((p) => p.rank === rank),
          ex.concurrency,
          async (p) => {
            if (ex.interrupted) {
              p.action.outcome = 'failed';
              p.action.error = `not written: restore interrupted (${ex.interrupted})`;
              return;
            }
            await writeEntry(ex, p);
            ex.reporter.progress({ id: 'restore', label: 'restoring objects', current: ++progress.done, total: progress.total });
          },
        ),
      );
    }
  }
  if (progress.total) ex.reporter.progress({ id: 'restore', label: 'restoring objects', current: progress.done, total: progress.total, done: true });
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
async function linkToRestoredOwners(ex: Execution, released: Planned[], writes: Planned[]): Promise<void> {
  if (ex.interrupted) return;
  const entries = [
    ...new Set([...released.filter((p) => p.action.outcome !== 'failed'), ...writes.filter((p) => p.ownerPending && p.action.outcome === 'done')]),
  ];
  if (!entries.length) return;
  ex.resolver.forget();
  await ex.timer.time('write', () => relinkOwners(ex.client, ex.resolver, ex.owners, entries, ex.reporter));
}

/** 4. Prune last, most dependent kinds first. */
async function prune(ex: Execution, writes: Planned[]): Promise<void> {
  const prunes = writes.filter((x) => x.action.action === 'prune');
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
