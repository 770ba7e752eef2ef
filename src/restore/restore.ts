/**
 * `restore --resources`: put a bundle's Calico objects back into a cluster, in dependency order, previewed,
 * schema-aware, without the operator or Calico's IPAM controllers fighting the writes, and verified after.
 *
 * Three stages: `planRestore` (plan.ts, plan-object.ts) reads everything and decides one RestoreAction per object
 * (writes nothing); `executeRestore` (execute.ts, write.ts) carries a plan out; the read-back (read-back.ts)
 * re-reads what was written and sums the restore up. `restoreResources` is all three, with the confirmation
 * between planning and executing.
 */
import { assertSupportedCalico } from '../calico/supported.js';
import { RefusedError } from '../core/errors.js';
import type { Reporter } from '../io/host.js';
import type { KubeClient } from '../kube/client.js';
import { createCrds, executeRestore } from './execute.js';
import { restoreEtcd, type EtcdRestoreSource } from './etcd-restore.js';
import { pendingDeletionNames, settleDeletions, writeTeardownNeeds } from './operator.js';
import { reportHelmRecordsLeft } from './helm-records.js';
import { planRestore } from './plan.js';
import { dryRunResult } from './read-back.js';
import { DesiredSpool } from './spool.js';
import { PhaseTimer } from './timings.js';
import { DEFAULT_RESTORE_CONCURRENCY, WRITES, type RestoreOptions, type RestoreResult, type RestoreSource } from './types.js';
import { serverDryRun } from './write.js';

export { executeRestore } from './execute.js';
export { planRestore } from './plan.js';
export {
  DEFAULT_RESTORE_CONCURRENCY,
  type ExistingPolicy,
  type ObjectRef,
  type RestoreAction,
  type RestoreActionKind,
  type RestoreOptions,
  type RestorePlan,
  type RestoreResult,
  type RestoreSource,
} from './types.js';

/**
 * Plan, ask (unless dry run), execute. A dry run returns the plan with `ok` telling whether a real run
 * would restore everything; it writes nothing (server-side dry runs only).
 */
export async function restoreResources(client: KubeClient, bundle: RestoreSource, opts: RestoreOptions, reporter: Reporter): Promise<RestoreResult> {
  // The objects to write live in a temporary file until the read-back has checked them (spool.ts).
  const spool = new DesiredSpool();
  try {
    return await planAndExecute(client, bundle, opts, reporter, spool);
  } finally {
    spool.close();
  }
}

/** An etcd-datastore restore reads the bundle's v3 objects and IPAM records, which only an opened Bundle has. */
function etcdSource(bundle: RestoreSource): EtcdRestoreSource {
  const b = bundle as Partial<EtcdRestoreSource>;
  if (!b.v3Objects || !b.etcdIpamRecords) throw new Error('an etcd-datastore restore needs an opened bundle');
  return bundle as unknown as EtcdRestoreSource;
}

async function planAndExecute(
  client: KubeClient,
  bundle: RestoreSource,
  opts: RestoreOptions,
  reporter: Reporter,
  spool: DesiredSpool,
): Promise<RestoreResult> {
  // Before planning: in v3-CRD mode a plan would create the v1 CRDs, which flips the operator back to v1 mode over
  // stale data. On the etcd datastore the objects go to etcd (etcd-restore.ts); CRDs would be written nowhere Calico reads.
  const datastore = await assertSupportedCalico(client, 'restore', 'nothing was restored', { etcdHandled: true });
  if (datastore.type === 'etcd') return restoreEtcd(client, etcdSource(bundle), opts, reporter);
  if (bundle.manifest.datastore?.type === 'etcd') {
    throw new RefusedError("this bundle holds an etcd datastore's Calico data, and Calico here uses the Kubernetes datastore: nothing was restored", {
      hint: 'restore it into the etcd-datastore Calico it came from (calicoctl datastore migrate moves data between datastores)',
    });
  }
  const timer = new PhaseTimer();
  let { plan, planned, bundleCrds } = await planRestore(client, bundle, opts, reporter, timer, spool);
  // Planning skipped them (admission.ts isLeftToHelm); said once, after the checks planning makes first.
  await timer.time('readBundle', () => reportHelmRecordsLeft(bundle, opts, reporter));
  if (opts.dryRun) {
    await timer.time('serverDryRun', () => serverDryRun(client, planned, opts.concurrency ?? DEFAULT_RESTORE_CONCURRENCY));
    return dryRunResult(plan, planned, timer);
  }
  // Entries with gone owners carry a note, so they are among those kept as objects (plan-table.ts).
  const writes =
    planned.where((i) => WRITES.has(planned.kindAt(i))).length +
    planned.kept().filter((p) => !WRITES.has(p.action.action) && p.action.goneOwners?.length).length +
    plan.crdsToCreate.length;
  if (writes && opts.confirm && !(await timer.time('confirm', () => opts.confirm!(plan)))) {
    throw new RefusedError('restore not confirmed; nothing was written', { hint: 'answer y on a terminal, or pass --yes (see the preview with --dry-run)' });
  }
  if (plan.deleting.length || plan.awaitingCollection.length) {
    // A teardown in progress (the CRDs deleted under a running operator): let it finish, then plan what is left.
    const missing = plan.crdsToCreate;
    const crds = bundleCrds;
    const pools = new Set(planned.where((i) => planned.headAt(i).kind === 'IPPool' && planned.kindAt(i) === 'create').map((i) => planned.refAt(i).name));
    const prepare = async () => {
      await createCrds(client, missing, crds, reporter, timer);
      await writeTeardownNeeds(client, bundle, pools, reporter);
    };
    const { installType, version } = bundle.manifest.calico;
    const operatorVersion = installType === 'operator' ? version : undefined;
    await timer.time('operator', () => settleDeletions(client, plan, prepare, reporter, opts.deletionTimeoutMs, operatorVersion));
    ({ plan, planned, bundleCrds } = await planRestore(client, bundle, opts, reporter, timer, spool));
    if (plan.deleting.length || plan.awaitingCollection.length)
      throw new RefusedError(`being deleted again: ${pendingDeletionNames(plan)}; nothing but missing CRDs was written`, {
        hint: 'something keeps deleting Calico objects: find it, then restore again',
      });
  }
  return executeRestore(client, plan, planned, bundleCrds, opts, reporter, timer);
}
