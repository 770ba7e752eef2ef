/**
 * A bundle read from Calico's etcd against that etcd now, as a plan for an etcd install and its verify-data step
 * judge it: what a restore of the bundle would have to write (restoreEtcd's own judgement, run as a dry run). A
 * user's object that is missing or differs (spec, labels, annotations), and an IPAM record a restore would write
 * (an allocation of a pod that still exists no longer held by its handle, a lost block, handle or affinity) or an
 * address held twice, is a difference. Calico's own records (Nodes, WorkloadEndpoints that differ, ClusterInformation)
 * and allocations of pods that are gone are live state, not differences.
 */
import type { Bundle } from '../bundle/reader.js';
import type { EtcdAccessFlags } from '../calico/etcd-connection.js';
import { etcdKindOf, roleOf } from '../calico/etcd-datastore.js';
import { CALICO_CRD_GROUP } from '../calico/knowledge.js';
import type { Release } from '../calico/release.js';
import { checkAgainstSchema } from '../calico/schema.js';
import type { Reporter } from '../io/host.js';
import type { KubeClient } from '../kube/client.js';
import { restoreEtcd } from '../restore/etcd-restore.js';
import type { PlanFinding } from './types.js';

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

export async function etcdDifferences(client: KubeClient, bundle: Bundle, reporter: Reporter, etcd?: EtcdAccessFlags): Promise<EtcdDifference[]> {
  const r = await restoreEtcd(client, bundle, { dryRun: true, ...(etcd ? { etcd } : {}) }, reporter);
  const out: EtcdDifference[] = [];
  for (const a of r.actions) {
    const why = REASONS[a.action];
    if (why) out.push({ id: a.id, reason: a.reason ? `${why}: ${a.reason}` : why });
  }
  for (const d of r.ipamProblems ?? []) out.push({ id: d, reason: 'an address held twice' });
  return out;
}

/**
 * What the target release does not know of the user's objects in etcd (a downgrade): fields and kinds its data model
 * lacks, judged by the target's crd.projectcalico.org schemas (generated from the same Go types its programs read
 * etcd with). They stay in etcd, unread by the target's programs, and a write by the target (calicoctl apply) drops
 * the fields. Undefined when the target knows everything.
 */
export async function etcdFieldsTheTargetLacks(bundle: Bundle, target: Release): Promise<PlanFinding | undefined> {
  const crds = new Map(target.crds.filter((c) => c.spec?.group === CALICO_CRD_GROUP).map((c) => [c.spec.names.kind as string, c]));
  if (!crds.size) return undefined;
  const details: string[] = [];
  const objects: string[] = [];
  for await (const { object } of bundle.v3Objects()) {
    const kind = etcdKindOf(object.kind);
    if (!kind || roleOf(kind, object.metadata.name) !== 'config') continue;
    const id = `${object.kind}/${object.metadata.namespace ? `${object.metadata.namespace}/` : ''}${object.metadata.name}`;
    const crd = crds.get(object.kind);
    if (!crd) {
      objects.push(id);
      details.push(`${id}: Calico ${target.version} has no ${object.kind}`);
      continue;
    }
    const pruned = checkAgainstSchema({ ...object, apiVersion: `${CALICO_CRD_GROUP}/v1` }, crd).filter((f) => f.kind === 'pruned' && f.path.startsWith('spec'));
    if (!pruned.length) continue;
    objects.push(id);
    details.push(`${id}: ${pruned.map((f) => f.path).join(', ')}`);
  }
  if (!details.length) return undefined;
  return {
    id: 'etcd-fields-target-lacks',
    severity: 'warning',
    title: `${objects.length} Calico object(s) in etcd use fields or kinds Calico ${target.version} does not know`,
    objects,
    details,
    action: 'keep',
    plan: `kept in etcd as they are; ${target.version}'s programs do not read them, and a write by ${target.version} (calicoctl apply or replace) drops those fields`,
  };
}
