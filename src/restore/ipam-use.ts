/**
 * Whether a bundle allocation's address is used now, judged before restore puts it back into IPAM.
 *
 * The bundle is an old picture of IPAM. Since it was taken, pods were deleted (the tigera operator's teardown deletes
 * its own) and calico-node's tunnel allocator may have given its node another address (it does so when the node's
 * address is not assigned in IPAM: node/pkg/allocateip ensureHostTunnelAddress). Putting such an allocation back
 * leaks its address (`calicoctl ipam check` reports it, a tunnel handle holds two addresses). So an allocation goes
 * back only when its address is used now:
 * - a pod-network allocation (`k8s-pod-network.<containerID>`): some pod that is not finished uses the address. A pod
 *   is finished as libcalico-go judges it (conversion.go IsFinished): Succeeded, Failed or Completed, or being
 *   deleted once the CNI plugin's DEL cleared its `cni.projectcalico.org/podIP` annotation. A pod being deleted whose
 *   DEL has not run still has its network, and that DEL releases the allocation by its handle. Its addresses are
 *   those of its status and of the CNI plugin's annotations (libcalico-go reads either): whichever pod uses the
 *   address keeps it allocated, never dropped while a running pod has it (that would be the duplicate-IP harm);
 * - a node tunnel allocation (`<kind>-tunnel-addr-<node>`): the Node names that same address for that tunnel now
 *   (libcalico-go keeps the Calico Node's tunnel addresses in these annotations of the Kubernetes Node:
 *   k8s/resources/node.go); a node naming another address, none, or gone does not use it.
 * Other allocations (a handle of another IPAM user, Windows' reserved addresses, LoadBalancer IPAM) and those whose
 * pods or nodes could not be read are put back as before: nothing says they are unused.
 */
import { IPAM_POD_HANDLE_PREFIX, POD_ANNOTATION_POD_IP, POD_ANNOTATION_POD_IPS } from '../calico/knowledge.js';
import { canonicalIp } from '../doctor/ip.js';
import type { Reporter } from '../io/host.js';
import type { KubeObject } from '../kube/types.js';

/** An IPAMBlock attribute: whose allocation it is. */
export interface AllocationAttr {
  handle_id?: string;
  secondary?: { namespace?: string; pod?: string; node?: string; type?: string } | null;
}

export type Use = 'used' | 'unused' | 'unjudged';

/** A tunnel handle's kind -> the Kubernetes Node annotation libcalico-go keeps that tunnel's address in. */
const TUNNEL_ANNOTATIONS: Record<string, string> = {
  ipip: 'projectcalico.org/IPv4IPIPTunnelAddr',
  vxlan: 'projectcalico.org/IPv4VXLANTunnelAddr',
  'vxlan-v6': 'projectcalico.org/IPv6VXLANTunnelAddr',
  wireguard: 'projectcalico.org/IPv4WireguardInterfaceAddr',
  'wireguard-v6': 'projectcalico.org/IPv6WireguardInterfaceAddr',
};
/** node/pkg/allocateip generateHandleAndAttributes: `<kind>-tunnel-addr-<node>`. */
const TUNNEL_HANDLE = /^(ipip|vxlan|vxlan-v6|wireguard|wireguard-v6)-tunnel-addr-(.+)$/;

const PHASES_FINISHED = new Set(['Succeeded', 'Failed', 'Completed']);

/** libcalico-go conversion.go IsFinished. */
export function podFinished(p: KubeObject): boolean {
  if (p.metadata.deletionTimestamp && p.metadata.annotations?.[POD_ANNOTATION_POD_IP] === '') return true;
  return PHASES_FINISHED.has(p.status?.phase);
}

/** Every address a pod uses: its status's and the CNI plugin's annotations' (a CIDR or a bare address). */
export function podAddresses(p: KubeObject): string[] {
  const ann = p.metadata.annotations ?? {};
  const texts: string[] = [
    ...((p.status?.podIPs ?? []) as { ip?: string }[]).map((x) => x.ip ?? ''),
    p.status?.podIP ?? '',
    ...(ann[POD_ANNOTATION_POD_IPS] ?? '').split(','),
    ann[POD_ANNOTATION_POD_IP] ?? '',
  ];
  return [...new Set(texts.map((t) => canonicalIp(t.trim().split('/')[0]!)).filter((ip): ip is string => !!ip))];
}

/** What was left out or put back unjudged, per kind (each allocation counted once). */
export interface UseTally {
  unusedPods: number;
  unusedTunnels: number;
  unjudgedPods: number;
  unjudgedTunnels: number;
}

/** The cluster's pods and nodes as the judgement needs them: read once, before any allocation is judged. */
export class AddressUse {
  readonly tally: UseTally = { unusedPods: 0, unusedTunnels: 0, unjudgedPods: 0, unjudgedTunnels: 0 };
  private readonly podIps?: Set<string>;
  private readonly nodes?: Map<string, Record<string, string>>;

  /** `pods`/`nodes` undefined: they could not be read (`podsError`/`nodesError` says why). */
  constructor(
    pods: KubeObject[] | undefined,
    nodes: KubeObject[] | undefined,
    readonly podsError?: string,
    readonly nodesError?: string,
  ) {
    if (pods) this.podIps = new Set(pods.filter((p) => !p.spec?.hostNetwork && !podFinished(p)).flatMap(podAddresses));
    if (nodes) this.nodes = new Map(nodes.map((n) => [n.metadata.name, n.metadata.annotations ?? {}]));
  }

  /** Whether the allocation `attr` of `address` is used now (not counted). */
  use(attr: AllocationAttr, address: string): Use {
    const handle = attr.handle_id ?? '';
    const ip = canonicalIp(address);
    if (handle.startsWith(IPAM_POD_HANDLE_PREFIX)) {
      if (!this.podIps || !ip) return 'unjudged';
      return this.podIps.has(ip) ? 'used' : 'unused';
    }
    const tunnel = TUNNEL_HANDLE.exec(handle);
    if (tunnel) {
      if (!this.nodes || !ip) return 'unjudged';
      const named = this.nodes.get(tunnel[2]!)?.[TUNNEL_ANNOTATIONS[tunnel[1]!]!];
      return named && canonicalIp(named.split('/')[0]!) === ip ? 'used' : 'unused';
    }
    return 'unjudged';
  }

  /** `use`, counted in the tally: whether to put the allocation back (all but an unused one). */
  keep(attr: AllocationAttr, address: string): boolean {
    const u = this.use(attr, address);
    const tunnel = TUNNEL_HANDLE.test(attr.handle_id ?? '');
    const pod = (attr.handle_id ?? '').startsWith(IPAM_POD_HANDLE_PREFIX);
    if (u === 'unused') {
      if (tunnel) this.tally.unusedTunnels++;
      else this.tally.unusedPods++;
    } else if (u === 'unjudged') {
      if (tunnel) this.tally.unjudgedTunnels++;
      else if (pod) this.tally.unjudgedPods++;
    }
    return u !== 'unused';
  }

  /** One line per kind of allocation left out or put back unjudged. */
  lines(): { left: { kind: 'pod' | 'tunnel'; count: number; line: string }[]; unjudged: { kind: 'pod' | 'tunnel'; count: number; line: string }[] } {
    const t = this.tally;
    const left = [];
    const unjudged = [];
    if (t.unusedPods)
      left.push({
        kind: 'pod' as const,
        count: t.unusedPods,
        line: `${t.unusedPods} pod allocation(s) of the bundle not put back: no running pod uses their address now (their pods are gone; putting them back would leak the addresses)`,
      });
    if (t.unusedTunnels)
      left.push({
        kind: 'tunnel' as const,
        count: t.unusedTunnels,
        line: `${t.unusedTunnels} node tunnel allocation(s) of the bundle not put back: their node names another tunnel address now, or none (calico-node's allocator moved on, or the node is gone)`,
      });
    if (t.unjudgedPods)
      unjudged.push({
        kind: 'pod' as const,
        count: t.unjudgedPods,
        line: `${t.unjudgedPods} pod allocation(s) of the bundle put back without knowing whether a pod uses them: the cluster's pods could not be read (${this.podsError ?? 'not read'}); run calicoctl ipam check for leaks`,
      });
    if (t.unjudgedTunnels)
      unjudged.push({
        kind: 'tunnel' as const,
        count: t.unjudgedTunnels,
        line: `${t.unjudgedTunnels} node tunnel allocation(s) of the bundle put back without knowing whether their node uses them: the cluster's nodes could not be read (${this.nodesError ?? 'not read'}); run calicoctl ipam check for leaks`,
      });
    return { left, unjudged };
  }
}

/** Reads the cluster's pods and nodes for the judgement; a read that fails leaves its kind unjudged (put back). */
export async function readAddressUse(pods?: () => Promise<KubeObject[]>, nodes?: () => Promise<KubeObject[]>): Promise<AddressUse> {
  const read = async (list?: () => Promise<KubeObject[]>): Promise<[KubeObject[] | undefined, string | undefined]> => {
    if (!list) return [undefined, undefined];
    try {
      return [await list(), undefined];
    } catch (err) {
      return [undefined, err instanceof Error ? err.message : String(err)];
    }
  };
  const [p, pe] = await read(pods);
  const [n, ne] = await read(nodes);
  return new AddressUse(p, n, pe, ne);
}

/** One reporter line per kind of allocation left out (info) or put back unjudged (warn). */
export function reportUse(use: AddressUse, reporter: Reporter): void {
  const { left, unjudged } = use.lines();
  for (const l of left) reporter.info('CNR_RESTORE_IPAM_UNUSED', l.line, { kind: l.kind, count: l.count });
  for (const l of unjudged) reporter.warn('CNR_RESTORE_IPAM_UNJUDGED', l.line, { kind: l.kind, count: l.count });
}
