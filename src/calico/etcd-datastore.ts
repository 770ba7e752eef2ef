/**
 * Calico's etcd datastore (calico-etcd.yaml), as libcalico-go lays it out (lib/backend/model: resource.go, block.go,
 * block_affinity.go, ipam_handle.go, ipam_config.go): every projectcalico.org/v3 resource as its JSON at
 * `/calico/resources/v3/projectcalico.org/<plural>/[<namespace>/]<name>`, IPAM under `/calico/ipam/v2/` (blocks,
 * handles, host affinities, config). Felix's own status keys (`/calico/felix/v2/...`) are runtime state Felix
 * rewrites and are not read.
 *
 * Which kinds restore may overwrite is decided here, from this table, never from a bundle.
 */
import type { KubeObject } from '../kube/types.js';

export const ETCD_RESOURCES_PREFIX = '/calico/resources/v3/projectcalico.org/';
export const ETCD_IPAM_PREFIX = '/calico/ipam/v2/';
export const CALICO_V3_API_VERSION = 'projectcalico.org/v3';

/**
 * How restore treats a kind that exists live and differs: `config` is the user's (the bundle's version replaces the
 * live one); `state` is written by Calico's programs (calico-node writes its Node, the CNI plugin its
 * WorkloadEndpoints, kube-controllers the Profiles of namespaces and service accounts): created when absent, never
 * overwritten.
 */
export type EtcdKindRole = 'config' | 'state';

export interface EtcdKind {
  kind: string;
  /** libcalico-go's plural, lower case (the key's path segment). */
  plural: string;
  namespaced: boolean;
  role: EtcdKindRole;
}

/** The v3 kinds of Calico's etcd datastore (3.26-3.32), from libcalico-go's registerResourceInfo and namespace.IsNamespaced. */
export const ETCD_KINDS: readonly EtcdKind[] = [
  { kind: 'BGPConfiguration', plural: 'bgpconfigurations', namespaced: false, role: 'config' },
  { kind: 'BGPFilter', plural: 'bgpfilters', namespaced: false, role: 'config' },
  { kind: 'BGPPeer', plural: 'bgppeers', namespaced: false, role: 'config' },
  { kind: 'CalicoNodeStatus', plural: 'caliconodestatuses', namespaced: false, role: 'state' },
  { kind: 'ClusterInformation', plural: 'clusterinformations', namespaced: false, role: 'state' },
  { kind: 'FelixConfiguration', plural: 'felixconfigurations', namespaced: false, role: 'config' },
  { kind: 'GlobalNetworkPolicy', plural: 'globalnetworkpolicies', namespaced: false, role: 'config' },
  { kind: 'GlobalNetworkSet', plural: 'globalnetworksets', namespaced: false, role: 'config' },
  { kind: 'HostEndpoint', plural: 'hostendpoints', namespaced: false, role: 'config' },
  { kind: 'IPAMConfig', plural: 'ipamconfigs', namespaced: false, role: 'config' },
  { kind: 'IPPool', plural: 'ippools', namespaced: false, role: 'config' },
  { kind: 'IPReservation', plural: 'ipreservations', namespaced: false, role: 'config' },
  { kind: 'KubeControllersConfiguration', plural: 'kubecontrollersconfigurations', namespaced: false, role: 'config' },
  { kind: 'NetworkPolicy', plural: 'networkpolicies', namespaced: true, role: 'config' },
  { kind: 'NetworkSet', plural: 'networksets', namespaced: true, role: 'config' },
  { kind: 'Node', plural: 'nodes', namespaced: false, role: 'state' },
  { kind: 'Profile', plural: 'profiles', namespaced: false, role: 'state' },
  { kind: 'StagedGlobalNetworkPolicy', plural: 'stagedglobalnetworkpolicies', namespaced: false, role: 'config' },
  { kind: 'StagedKubernetesNetworkPolicy', plural: 'stagedkubernetesnetworkpolicies', namespaced: true, role: 'config' },
  { kind: 'StagedNetworkPolicy', plural: 'stagednetworkpolicies', namespaced: true, role: 'config' },
  { kind: 'Tier', plural: 'tiers', namespaced: false, role: 'config' },
  { kind: 'WorkloadEndpoint', plural: 'workloadendpoints', namespaced: true, role: 'state' },
];

const BY_PLURAL = new Map(ETCD_KINDS.map((k) => [k.plural, k]));
const BY_KIND = new Map(ETCD_KINDS.map((k) => [k.kind, k]));

export const etcdKindOf = (kind: string): EtcdKind | undefined => BY_KIND.get(kind);

/**
 * kube-controllers in etcd mode writes each Kubernetes NetworkPolicy as a Calico NetworkPolicy named
 * `knp.default.<name>` and keeps it in step: the Kubernetes object is the source, so restore never overwrites it.
 */
export function roleOf(kind: EtcdKind, name: string): EtcdKindRole {
  if (kind.kind === 'NetworkPolicy' && name.startsWith('knp.default.')) return 'state';
  return kind.role;
}

/** The words `--kinds` takes for the IPAM records (as the Kubernetes datastore's IPAM kinds are named). */
export const ETCD_IPAM_WORDS = ['ipam', 'ipamblocks', 'ipamhandles', 'blockaffinities'];

/** Whether one of the user's `--kinds` words (lower case) names this kind: its kind, plural or `<plural>.projectcalico.org`. */
export function etcdKindNamed(kind: EtcdKind | undefined, kindName: string, words: readonly string[]): boolean {
  return words.some((w) => w === kindName.toLowerCase() || (!!kind && (w === kind.plural || w === `${kind.plural}.projectcalico.org`)));
}

export interface EtcdResourceKey {
  kind: EtcdKind;
  namespace?: string;
  name: string;
}

/** What a resource key names; undefined for a kind this table does not know (or a malformed key). */
export function parseResourceKey(key: string): EtcdResourceKey | { unknownPlural: string } | undefined {
  if (!key.startsWith(ETCD_RESOURCES_PREFIX)) return undefined;
  const segs = key.slice(ETCD_RESOURCES_PREFIX.length).split('/');
  const kind = BY_PLURAL.get(segs[0]!.toLowerCase());
  if (!kind) return segs[0] ? { unknownPlural: segs[0] } : undefined;
  if (kind.namespaced ? segs.length !== 3 : segs.length !== 2) return undefined;
  if (segs.slice(1).some((s) => s === '')) return undefined;
  return kind.namespaced ? { kind, namespace: segs[1]!, name: segs[2]! } : { kind, name: segs[1]! };
}

/**
 * The key of a v3 object, built from this table (never from a path a bundle gives); undefined for an unknown kind,
 * a namespace where its kind has none (or none where it needs one), or a name that would leave its folder.
 */
export function resourceKeyOf(obj: KubeObject): { key: string; kind: EtcdKind } | undefined {
  const kind = BY_KIND.get(obj.kind);
  const { name, namespace } = obj.metadata;
  if (!kind || !safeSegment(name) || kind.namespaced !== !!namespace || (namespace !== undefined && !safeSegment(namespace))) return undefined;
  return { key: `${ETCD_RESOURCES_PREFIX}${kind.plural}/${namespace ? `${namespace}/` : ''}${name}`, kind };
}

const safeSegment = (s: string | undefined): s is string => typeof s === 'string' && s !== '' && s !== '.' && s !== '..' && !/[/\0]/.test(s);

/** The IPAM records: blocks, handles, host affinities and the IPAM config. */
export type IpamRecordType = 'block' | 'handle' | 'affinity' | 'config';

/** Which IPAM record a key is; undefined for anything else (restore writes nothing it cannot name). */
export function ipamRecordType(key: string): IpamRecordType | undefined {
  if (!key.startsWith(ETCD_IPAM_PREFIX) || key.includes('/../') || key.includes('\0')) return undefined;
  const rest = key.slice(ETCD_IPAM_PREFIX.length);
  if (/^assignment\/ipv[46]\/block\/[0-9a-fA-F.:]+-\d{1,3}$/.test(rest)) return 'block';
  if (/^handle\/[^/]+$/.test(rest)) return 'handle';
  if (/^host\/[^/]+\/ipv[46]\/block\/[0-9a-fA-F.:]+-\d{1,3}$/.test(rest)) return 'affinity';
  if (rest === 'config') return 'config';
  return undefined;
}

/**
 * How an IPAM record travels in a bundle (`etcd/ipam.jsonl`): one object per key, the stored JSON as `raw`, the exact
 * text etcd held. Never parsed and re-serialised: a block's `sequenceNumber` is a 64-bit integer that a JavaScript
 * number rounds (1796638193357450117 became 1796638193357450200), and restore must write back what was there.
 */
export const ETCD_RECORD = { apiVersion: 'etcd.cni-rewind.io/v1', kind: 'EtcdRecord' } as const;

export function ipamRecord(key: string, raw: string): KubeObject {
  return { ...ETCD_RECORD, metadata: { name: key }, raw } as KubeObject;
}

/** An integer literal a JavaScript number cannot hold exactly (more than 15 digits), outside strings. */
export function hasUnsafeInteger(json: string): boolean {
  return /[:[,]\s*-?\d{16,}/.test(json.replace(/"(?:[^"\\]|\\.)*"/g, '""'));
}
