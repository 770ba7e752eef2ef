/**
 * The datastore migration's proof, before the Kubernetes datastore is unlocked (pods get addresses from it from then
 * on): what etcd holds is in the copy. Calico's resources are read by calicoctl from both datastores (the same
 * release reads both the same way, so a policy's name or a default reads alike), every field of etcd's spec must
 * have the same value in the copy (a program may add defaults, never drop or change what was set). IPAM is compared
 * record by record: each allocation of each block (its ordinal and handle), each handle's blocks and each confirmed
 * block affinity, with the node names calicoctl's import gives them (the Kubernetes node of each Calico node).
 */
import type { EtcdGateway } from '../etcd/gateway.js';
import { ETCD_IPAM_PREFIX, ipamRecordType } from '../calico/etcd-datastore.js';
import { EnvironmentError } from '../core/errors.js';
import { IPAM_TYPES } from '../calico/ipam-types.js';
import type { KubeClient } from '../kube/client.js';

/** The user's kinds calicoctl's export carries (its allVExport list without nodes and kube-controllers' own config). */
export const MIGRATED_KINDS = [
  'ippools',
  'ipreservations',
  'bgppeers',
  'bgpconfigs',
  'bgpfilters',
  'felixconfigs',
  'globalnetworkpolicies',
  'globalnetworksets',
  'networkpolicies',
  'networksets',
  'heps',
] as const;
const NAMESPACED = new Set<string>(['networkpolicies', 'networksets']);
/** Handles calicoctl renames after the node (migrateipam.go ipamHandlePrefixes). */
const TUNNEL_HANDLE_PREFIXES = ['ipip-tunnel-addr-', 'vxlan-tunnel-addr-', 'wireguard-tunnel-addr-'];

const KDD = IPAM_TYPES;

/** `calicoctl get <kind> -o json` in one datastore. */
export type CalicoctlGet = (kind: string, allNamespaces: boolean) => Promise<string>;

interface V3Object {
  metadata: { name: string; namespace?: string };
  spec?: unknown;
}

function items(json: string, what: string): V3Object[] {
  let parsed: any;
  try {
    parsed = JSON.parse(json);
  } catch {
    throw new EnvironmentError(`${what} did not print JSON`);
  }
  return Array.isArray(parsed?.items) ? parsed.items : parsed?.metadata ? [parsed] : [];
}

/** Paths of `want` whose value `got` lacks or has otherwise; arrays compare whole. */
export function missingFields(want: unknown, got: unknown, at = 'spec'): string[] {
  if (want && typeof want === 'object' && !Array.isArray(want)) {
    if (!got || typeof got !== 'object' || Array.isArray(got)) return [at];
    return Object.entries(want as Record<string, unknown>).flatMap(([k, v]) => missingFields(v, (got as Record<string, unknown>)[k], `${at}.${k}`));
  }
  return JSON.stringify(want) === JSON.stringify(got) ? [] : [at];
}

/** Calico resources of etcd that the copy lacks or holds otherwise: `Kind ns/name: field` lines. */
export async function compareResources(etcdGet: CalicoctlGet, kddGet: CalicoctlGet): Promise<{ compared: number; problems: string[] }> {
  const problems: string[] = [];
  let compared = 0;
  for (const kind of MIGRATED_KINDS) {
    const all = NAMESPACED.has(kind);
    const key = (o: V3Object) => `${o.metadata.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata.name}`;
    // kube-controllers' copies of Kubernetes NetworkPolicies are made again from the Kubernetes objects on each side.
    const mine = (o: V3Object) => !o.metadata.name.startsWith('knp.default.');
    const source = items(await etcdGet(kind, all), `calicoctl get ${kind} (etcd)`).filter(mine);
    const copy = new Map(items(await kddGet(kind, all), `calicoctl get ${kind} (Kubernetes)`).map((o) => [key(o), o]));
    for (const o of source) {
      compared++;
      const got = copy.get(key(o));
      if (!got) problems.push(`${kind} ${key(o)}: not in the Kubernetes datastore`);
      else for (const f of missingFields(o.spec ?? {}, got.spec ?? {})) problems.push(`${kind} ${key(o)}: ${f} differs`);
    }
  }
  return { compared, problems };
}

/** The Kubernetes node of each Calico node (its `k8s` orchestrator reference), as calicoctl's export renames them. */
export function nodeMapOf(nodesJson: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const n of items(nodesJson, 'calicoctl get nodes (etcd)') as any[]) {
    const ref = (n.spec?.orchRefs ?? []).find((r: any) => r?.orchestrator === 'k8s')?.nodeName;
    if (typeof ref === 'string' && ref) map.set(n.metadata.name, ref);
  }
  return map;
}

interface IpamView {
  /** `cidr ordinal` -> handle id. */
  allocations: Map<string, string>;
  /** handle id -> canonical JSON of its block map. */
  handles: Map<string, string>;
  /** `node cidr` of each confirmed affinity. */
  affinities: Set<string>;
}

const renameHandle = (id: string, nodes: Map<string, string>) => {
  const prefix = TUNNEL_HANDLE_PREFIXES.find((p) => id.startsWith(p));
  return prefix ? `${prefix}${nodes.get(id.slice(prefix.length)) ?? id.slice(prefix.length)}` : id;
};
const sortedJson = (m: Record<string, unknown> | undefined) => JSON.stringify(Object.entries(m ?? {}).sort(([a], [b]) => a.localeCompare(b)));

function addBlock(view: IpamView, b: any, nodes: Map<string, string>): void {
  (b.allocations ?? []).forEach((a: number | null, ordinal: number) => {
    if (a === null || a === undefined) return;
    view.allocations.set(`${b.cidr} ${ordinal}`, renameHandle(String(b.attributes?.[a]?.handle_id ?? ''), nodes));
  });
}

/** etcd's IPAM records, read at one revision, with calicoctl's node renames. */
export async function etcdIpam(etcd: EtcdGateway, nodes: Map<string, string>): Promise<IpamView> {
  const view: IpamView = { allocations: new Map(), handles: new Map(), affinities: new Set() };
  for await (const page of etcd.rangePrefix(ETCD_IPAM_PREFIX, 500)) {
    for (const kv of page.kvs) {
      const type = ipamRecordType(kv.key);
      const value = JSON.parse(kv.value.toString('utf8'));
      if (type === 'block') addBlock(view, value, nodes);
      else if (type === 'handle') view.handles.set(renameHandle(kv.key.split('/').pop()!, nodes), sortedJson(value.block));
      else if (type === 'affinity' && value.state === 'confirmed') {
        const [, host, , , cidr] = kv.key.slice(ETCD_IPAM_PREFIX.length).split('/');
        view.affinities.add(`${nodes.get(host!) ?? host} ${cidr!.replace(/-(\d+)$/, '/$1')}`);
      }
    }
  }
  return view;
}

export async function kubernetesIpam(client: KubeClient): Promise<IpamView> {
  const view: IpamView = { allocations: new Map(), handles: new Map(), affinities: new Set() };
  for (const b of await client.listAll<any>(KDD.block)) addBlock(view, b.spec ?? {}, new Map());
  for (const h of await client.listAll<any>(KDD.handle)) view.handles.set(String(h.spec?.handleID), sortedJson(h.spec?.block));
  for (const a of await client.listAll<any>(KDD.affinity))
    if (a.spec?.state === 'confirmed' && String(a.spec?.deleted) !== 'true') view.affinities.add(`${a.spec.node} ${a.spec.cidr}`);
  return view;
}

/** What etcd's IPAM has that the copy lacks or holds otherwise; the copy may hold more (a tunnel address made since). */
export function compareIpam(source: IpamView, copy: IpamView): string[] {
  const problems: string[] = [];
  for (const [at, handle] of source.allocations) {
    const got = copy.allocations.get(at);
    if (got !== handle) problems.push(`IPAM block allocation ${at}: ${handle} in etcd, ${got ?? 'free'} in the copy`);
  }
  for (const [id, blocks] of source.handles) if (copy.handles.get(id) !== blocks) problems.push(`IPAM handle ${id}: not the same blocks in the copy`);
  for (const a of source.affinities) if (!copy.affinities.has(a)) problems.push(`block affinity ${a}: not in the copy`);
  return problems;
}
