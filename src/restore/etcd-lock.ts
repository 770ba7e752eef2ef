/**
 * The datastore lock of an etcd-datastore Calico, as `calicoctl datastore migrate lock` sets it: ClusterInformation
 * default's `spec.datastoreReady: false`. While it is false the CNI plugin refuses every ADD and DEL and calico-node
 * does not start, so nothing allocates an address while restore writes IPAM. Released to its prior value (true when
 * it was unset); a prior false (someone else's lock) stays false.
 */
import { ETCD_RESOURCES_PREFIX } from '../calico/etcd-datastore.js';
import type { EtcdGateway } from '../etcd/gateway.js';
import type { Reporter } from '../io/host.js';

export const ETCD_CLUSTER_INFORMATION_KEY = `${ETCD_RESOURCES_PREFIX}clusterinformations/default`;

/** The command that releases a lock left behind (the process died between lock and release). */
export const ETCD_UNLOCK_COMMAND = 'calicoctl datastore migrate unlock (with the ETCD_* settings of calico-config)';

export interface EtcdLock {
  /** Put datastoreReady back; a problem in words (with the command that fixes it), or undefined. */
  release(): Promise<string | undefined>;
}

/**
 * Lock before IPAM is written. When ClusterInformation default is gone (the data was lost) and the bundle has it, it
 * is created locked from the bundle's (`created` then tells restore its own write of it is done).
 */
export async function lockDatastore(etcd: EtcdGateway, reporter: Reporter, fromBundle?: string): Promise<(EtcdLock & { created?: boolean }) | undefined> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const live = await etcd.get(ETCD_CLUSTER_INFORMATION_KEY);
    if (!live && fromBundle) {
      const ci = JSON.parse(fromBundle);
      if (!(await etcd.createIfAbsent(ETCD_CLUSTER_INFORMATION_KEY, JSON.stringify({ ...ci, spec: { ...ci.spec, datastoreReady: false } })))) continue;
      reporter.info(
        'CNR_RESTORE_DATASTORE_LOCKED',
        "created ClusterInformation default from the bundle's, locked (datastoreReady false) while IPAM is written",
        {
          prior: true,
        },
      );
      return { release: () => unlock(etcd, reporter), created: true };
    }
    if (!live) {
      reporter.warn('CNR_RESTORE_NO_DATASTORE_LOCK', 'ClusterInformation default does not exist in etcd: IPAM is written without the datastore lock');
      return undefined;
    }
    const ci = JSON.parse(live.value.toString('utf8'));
    const prior: boolean = ci.spec?.datastoreReady !== false;
    if (!prior) {
      reporter.warn(
        'CNR_RESTORE_ETCD_ALREADY_LOCKED',
        'the datastore is already locked (ClusterInformation default datastoreReady false): left locked after the restore',
      );
      return { release: async () => undefined };
    }
    const locked = JSON.stringify({ ...ci, spec: { ...ci.spec, datastoreReady: false } });
    if (!(await etcd.replaceIfUnchanged(ETCD_CLUSTER_INFORMATION_KEY, locked, live.modRevision))) continue;
    reporter.info('CNR_RESTORE_DATASTORE_LOCKED', 'locked the datastore (ClusterInformation default datastoreReady false) while IPAM is written', {
      prior: true,
    });
    return { release: () => unlock(etcd, reporter) };
  }
  throw new Error('ClusterInformation default kept changing while restore tried to lock the datastore');
}

async function unlock(etcd: EtcdGateway, reporter: Reporter): Promise<string | undefined> {
  try {
    for (let attempt = 0; attempt < 5; attempt++) {
      const live = await etcd.get(ETCD_CLUSTER_INFORMATION_KEY);
      if (!live) return `ClusterInformation default is gone from etcd; calico-node re-creates it when it starts`;
      const ci = JSON.parse(live.value.toString('utf8'));
      const unlocked = JSON.stringify({ ...ci, spec: { ...ci.spec, datastoreReady: true } });
      if (await etcd.replaceIfUnchanged(ETCD_CLUSTER_INFORMATION_KEY, unlocked, live.modRevision)) {
        reporter.info('CNR_RESTORE_DATASTORE_RELEASED', 'released the datastore lock (ClusterInformation default datastoreReady true)', {
          datastoreReady: true,
        });
        return undefined;
      }
    }
    return `ClusterInformation default kept changing: the datastore may still be locked; run ${ETCD_UNLOCK_COMMAND}`;
  } catch (err) {
    return `the datastore lock was not released (${(err as Error).message}); run ${ETCD_UNLOCK_COMMAND}`;
  }
}
