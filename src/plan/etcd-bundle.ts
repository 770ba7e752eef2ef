/**
 * The bundle a plan for an install on the etcd datastore relies on (an upgrade, etcd-plan.ts, or the move to the
 * Kubernetes datastore, migrate-plan.ts): found or given, opened, refused unless it was read from Calico's etcd, and
 * the plan-time preflight (bundle and cluster checks, the GitOps owners) made from it.
 */
import type { Bundle } from '../bundle/reader.js';
import { datastoreOfObjects, type CalicoObjects } from '../calico/calico-objects.js';
import { judgeReconcilers, markedObjects, type Reconciler } from '../calico/gitops.js';
import type { InstallMethod } from '../calico/install-method.js';
import { RefusedError } from '../core/errors.js';
import type { KubeClient } from '../kube/client.js';
import { clusterUid } from '../kube/cluster-uid.js';
import { checkBundle, checkCluster, newestBundleFor, openPlanBundle } from './preflight.js';
import type { PreflightCheck } from './types.js';

export interface EtcdPlanBundle {
  bundle: Bundle;
  bundlePath: string;
  uid: string;
  reconcilers: Reconciler[];
  preflight: PreflightCheck[];
}

/** Opens and checks the bundle; the caller closes it. `what` names the plan in the refusals ("a migration"). */
export async function openEtcdPlanBundle(
  client: KubeClient,
  calico: { objects: CalicoObjects; method: InstallMethod },
  opts: { bundle?: string; maxAgeMs: number; maxBackupAge: string; diskSnapshots?: boolean; now?: Date },
  what: string,
): Promise<EtcdPlanBundle> {
  const uid = await clusterUid(client);
  const bundlePath = opts.bundle ?? (await newestBundleFor(uid));
  if (!bundlePath)
    throw new RefusedError(`no bundle of this cluster found: ${what} relies on a verified backup of etcd`, {
      hint: 'run `cni-rewind backup` (it reads etcd) first, or pass --bundle PATH',
    });
  const bundle = await openPlanBundle(bundlePath);
  try {
    if (bundle.manifest.datastore?.type !== 'etcd')
      throw new RefusedError(`${bundlePath} was not read from Calico's etcd: ${what} relies on a backup of the etcd datastore`, {
        hint: 'take one with `cni-rewind backup` (it reads etcd), then plan again',
      });
    const reconcilers = await judgeReconcilers(client, markedObjects(calico.objects), calico.method);
    const cluster = await checkCluster(client, false, { reconcilers, datastore: datastoreOfObjects(calico.objects) });
    const { maxAgeMs, maxBackupAge, now } = opts;
    const preflight = [
      ...(await checkBundle(bundle, { uid, maxAgeMs, maxBackupAge, diskSnapshots: opts.diskSnapshots !== false, nodes: cluster.nodes, now })),
      ...cluster.checks,
    ];
    return { bundle, bundlePath, uid, reconcilers, preflight };
  } catch (err) {
    await bundle.close();
    throw err;
  }
}
