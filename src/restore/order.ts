/** The order in which restore writes objects, and which parts of them it writes: data in one place. */
import { CALICO_CRD_GROUP, OPERATOR_GROUP, SHARED_POLICY_GROUP } from '../calico/knowledge.js';
import { groupOf, type KubeObject } from '../kube/types.js';

export interface RestorePhase {
  id: string;
  title: string;
  /** Objects of these groups (any kind when `kinds` is absent). '' is the core group. */
  groups: string[];
  /** Kinds in the order they are written within the phase (e.g. Tier before the policies in it). */
  kinds?: string[];
  /** Hold ClusterInformation default .spec.datastoreReady=false while this phase writes. */
  datastoreLock?: boolean;
}

/**
 * CRDs (handled before any phase) -> namespaces/config -> operator.tigera.io -> ClusterInformation ->
 * IPAM (blocks, handles, affinities) -> IPPools/IPReservations -> BGP/Felix -> network sets/host endpoints ->
 * policies -> everything else.
 * IPAM comes before pools: calico-node's tunnel allocator claims a block as soon as an encapsulated pool exists,
 * whatever the datastore lock says, so a pool written first lets it claim (or re-claim) a CIDR the bundle's blocks
 * hold before they are back. Blocks before handles and affinities: an affinity or a handle without its block is
 * what kube-controllers' IPAM garbage collection removes. IPAM and pools are written under the datastore lock.
 */
export const RESTORE_PHASES: RestorePhase[] = [
  { id: 'config', title: 'namespaces and config', groups: [''], kinds: ['Namespace', 'ConfigMap', 'Secret'] },
  { id: 'operator', title: 'operator.tigera.io', groups: [OPERATOR_GROUP] },
  { id: 'cluster-information', title: 'ClusterInformation', groups: [CALICO_CRD_GROUP], kinds: ['ClusterInformation'] },
  { id: 'ipam', title: 'IPAM', groups: [CALICO_CRD_GROUP], kinds: ['IPAMConfig', 'IPAMBlock', 'IPAMHandle', 'BlockAffinity'], datastoreLock: true },
  // Pools are written under the lock too, after IPAM: a pool appearing makes every calico-node allocate its tunnel
  // address from it, and the blocks it would claim must be the bundle's, already back.
  { id: 'ip-pools', title: 'IP pools and reservations', groups: [CALICO_CRD_GROUP], kinds: ['IPPool', 'IPReservation'], datastoreLock: true },
  {
    id: 'bgp-felix',
    title: 'BGP and Felix configuration',
    groups: [CALICO_CRD_GROUP],
    kinds: ['BGPConfiguration', 'BGPFilter', 'BGPPeer', 'FelixConfiguration', 'KubeControllersConfiguration'],
  },
  { id: 'network-sets', title: 'network sets and host endpoints', groups: [CALICO_CRD_GROUP], kinds: ['GlobalNetworkSet', 'NetworkSet', 'HostEndpoint'] },
  {
    id: 'policies',
    title: 'policies',
    groups: [CALICO_CRD_GROUP, SHARED_POLICY_GROUP],
    kinds: [
      'Tier',
      'GlobalNetworkPolicy',
      'NetworkPolicy',
      'StagedGlobalNetworkPolicy',
      'StagedNetworkPolicy',
      'StagedKubernetesNetworkPolicy',
      'AdminNetworkPolicy',
      'BaselineAdminNetworkPolicy',
      'ClusterNetworkPolicy',
    ],
  },
];
export const OTHER_PHASE: RestorePhase = { id: 'other', title: 'everything else', groups: [] };

/** Phase and rank (phase index * 100 + kind index) of an object: lower is written first. */
export function phaseOf(obj: Pick<KubeObject, 'apiVersion' | 'kind'>): { phase: RestorePhase; rank: number } {
  const group = groupOf(obj.apiVersion);
  for (const [i, p] of RESTORE_PHASES.entries()) {
    if (!p.groups.includes(group)) continue;
    if (!p.kinds) return { phase: p, rank: i * 100 };
    const k = p.kinds.indexOf(obj.kind);
    if (k >= 0) return { phase: p, rank: i * 100 + k };
  }
  return { phase: OTHER_PHASE, rank: RESTORE_PHASES.length * 100 };
}

/**
 * Kinds never written back: pure observed state that their controller recreates (writing an old one
 * would only show stale conditions).
 */
export const NEVER_RESTORED_KINDS = new Set(['TigeraStatus']);

/**
 * Config objects restore writes from the bundle's config/ folder. The operator Deployment and the
 * calico-node DaemonSet are recorded there too but belong to the install manifests (plan/apply), not to restore.
 */
export const RESTORED_CONFIG_KINDS = new Set(['ConfigMap', 'Secret']);

// Which kinds keep their status is decided by STATUS_RELEVANT_KINDS in src/kube/normalize.ts (none today: every
// Calico kind with a status holds observed state its controller rewrites; IPAM state lives in spec).

/**
 * Fields restore never changes on an object that exists: runtime switches owned by whoever holds them.
 * datastoreReady=false is a lock (calicoctl datastore migrate, an upgrade in progress, a restore); writing the
 * bundle's value would take or break someone's lock. Restore only holds it itself and puts back the prior value.
 * On an object restore creates, the bundle's value is written.
 */
export const RUNTIME_FIELDS: { kind: string; path: string[] }[] = [{ kind: 'ClusterInformation', path: ['spec', 'datastoreReady'] }];

export const INSTALLATION_KIND = 'Installation';
export const INSTALLATION_NAME = 'default';
export const CLUSTER_INFORMATION = { kind: 'ClusterInformation', name: 'default' } as const;
