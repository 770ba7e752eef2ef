/**
 * A bundle read from Calico's etcd against that etcd now, as a plan for an etcd install and its verify-data step
 * judge it: what a restore of the bundle would have to write (restoreEtcd's own judgement, run as a dry run). A
 * user's object that is missing or differs (spec, labels, annotations), and an IPAM record a restore would write
 * (an allocation of a pod that still exists no longer held by its handle, a lost block, handle or affinity) or an
 * address held twice, is a difference. Calico's own records (Nodes, WorkloadEndpoints that differ, ClusterInformation)
 * and allocations of pods that are gone are live state, not differences.
 */
import type { Bundle } from '../bundle/reader.js';
import type { Reporter } from '../io/host.js';
import type { KubeClient } from '../kube/client.js';
import { restoreEtcd } from '../restore/etcd-restore.js';

export interface EtcdDifference {
  /** The restore action's id: `IPPool reserved-pool`, `IPAM block /calico/ipam/v2/assignment/...`. */
  id: string;
  reason: string;
}

const REASONS: Record<string, string> = {
  create: 'missing in etcd',
  update: 'differs from the bundle',
  refused: 'cannot be put back in place',
  unsupported: 'not a kind of Calico etcd datastore',
};

export async function etcdDifferences(client: KubeClient, bundle: Bundle, reporter: Reporter): Promise<EtcdDifference[]> {
  const r = await restoreEtcd(client, bundle, { dryRun: true }, reporter);
  const out: EtcdDifference[] = [];
  for (const a of r.actions) {
    const why = REASONS[a.action];
    if (why) out.push({ id: a.id, reason: a.reason ? `${why}: ${a.reason}` : why });
  }
  for (const d of r.ipamProblems ?? []) out.push({ id: d, reason: 'an address held twice' });
  return out;
}
