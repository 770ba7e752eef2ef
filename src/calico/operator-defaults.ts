/**
 * What the tigera operator writes into an Installation itself when a field is absent (its "poor man's defaulting":
 * installation core_controller.go fillDefaults and ippool/defaults.go fillDefaults, whose result the operator writes
 * back to the object). A field the target release's CRD lacks can be dropped on a downgrade when its value is exactly
 * this default: the user never set it. Any other value is configuration that the downgrade would lose.
 *
 * Read in tigera/operator v1.32.12, v1.34.3, v1.36.16, v1.38.13 and v1.40.15 (the operators of Calico 3.27 to
 * 3.31); only the fields that a shipped older Installation CRD lacks are listed (the rest are never dropped).
 */
import type { KubeObject } from '../kube/types.js';

/** A path with its array indices folded (`spec.calicoNetwork.ipPools[].name`). */
const folded = (path: string) => path.replace(/\[\d+\]/g, '[]');

/** `ipPools[3].name` -> 3 */
const poolIndex = (path: string) => Number(/ipPools\[(\d+)\]/.exec(path)?.[1] ?? -1);

type DefaultRule = (inst: KubeObject, value: unknown, path: string, livePools: KubeObject[]) => boolean;

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
const isV6 = (cidr: string) => cidr.includes(':');

/** ippool/defaults.go cidrToName: the network address fully expanded, ':' -> '.', then `-<bits>`. */
export function operatorPoolNameForCidr(cidr: string): string {
  const [addr = '', bits = ''] = cidr.split('/');
  if (!isV6(addr)) return `${addr}-${bits}`;
  const [head = '', tail = ''] = addr.split('::');
  const groups = (s: string) => (s ? s.split(':') : []);
  const h = groups(head);
  const t = groups(tail);
  const all = addr.includes('::') ? [...h, ...Array(8 - h.length - t.length).fill('0'), ...t] : h;
  return `${all.map((g) => g.padStart(4, '0')).join('.')}-${bits}`;
}

/**
 * The name ippool/defaults.go gives an entry without one: the live pool's name for that CIDR, else
 * default-ipv4-ippool / default-ipv6-ippool for a single pool or a dual-stack pair, else the CIDR-derived name.
 */
function operatorPoolName(inst: KubeObject, index: number, livePools: KubeObject[]): string | undefined {
  const entries: any[] = inst.spec?.calicoNetwork?.ipPools ?? [];
  const cidr = String(entries[index]?.cidr ?? '');
  const live = livePools.find((p) => p.spec?.cidr === cidr);
  if (live) return live.metadata.name;
  const v6 = entries.filter((e) => isV6(String(e.cidr ?? ''))).length;
  if (entries.length === 1 || (entries.length === 2 && v6 === 1)) return isV6(cidr) ? 'default-ipv6-ippool' : 'default-ipv4-ippool';
  return cidr ? operatorPoolNameForCidr(cidr) : undefined;
}

/** installation core_controller.go: the CNI type and the dataplane the operator defaults to (as written back). */
const cniType = (inst: KubeObject) => inst.spec?.cni?.type ?? 'Calico';
const linuxDataplane = (inst: KubeObject) => inst.spec?.calicoNetwork?.linuxDataplane ?? 'Iptables';

/** render/node.go DefaultCNIDirectories (v1.40.15, v1.42.3): where the operator puts the CNI plugin and its config. */
function cniDirectories(inst: KubeObject): { bin: string; conf: string } {
  switch (inst.spec?.kubernetesProvider) {
    case 'OpenShift':
      return { bin: '/var/lib/cni/bin', conf: '/var/run/multus/cni/net.d' };
    case 'GKE':
      return { bin: '/home/kubernetes/bin', conf: '/etc/cni/net.d' };
    default:
      return { bin: '/opt/cni/bin', conf: '/etc/cni/net.d' };
  }
}

/** Folded path -> whether `value` is what the operator writes when the field is absent. */
const RULES: Record<string, DefaultRule> = {
  // v1.34+: `var delay int32 = 0` for Calico CNI on the iptables dataplane; no default otherwise.
  'spec.calicoNetwork.linuxPolicySetupTimeoutSeconds': (inst, v) => v === 0 && cniType(inst) === 'Calico' && linuxDataplane(inst) === 'Iptables',
  // v1.32+ (Calico 3.27; v1.32.12 core_controller.go:544-548): Disabled when nil, on every Installation. The 3.26
  // operator (v1.30) has no Windows dataplane, so every 3.27 -> 3.26 downgrade meets it; only HNS is a setting.
  'spec.calicoNetwork.windowsDataplane': (_i, v) => v === 'Disabled',
  // v1.34+: [Workload, Tunnel] when empty.
  'spec.calicoNetwork.ipPools[].allowedUses': (_i, v) => same(v, ['Workload', 'Tunnel']),
  'spec.calicoNetwork.ipPools[].name': (inst, v, path, live) => v === operatorPoolName(inst, poolIndex(path), live),
  // v1.36+: ptr.ToPtr(false) when nil.
  'spec.calicoNetwork.ipPools[].disableNewAllocations': (_i, v) => v === false,
  // v1.38+: crdv1.Automatic when empty.
  'spec.calicoNetwork.ipPools[].assignmentMode': (_i, v) => v === 'Automatic',
  // v1.40 only (Calico 3.31; v1.42's Installation has no specVersion): Auto for the Calico CNI when nil
  // (core_controller.go:516-518). Every 3.31 Installation has it, so each 3.31 -> 3.32 upgrade meets it.
  'spec.cni.specVersion': (inst, v) => v === 'Auto' && cniType(inst) === 'Calico',
  // v1.40+ (Calico 3.31; core_controller.go:631-637, render/node.go DefaultCNIDirectories): the provider's CNI
  // directories when unset, for every CNI type. Every 3.31 Installation has them, so each 3.31 -> 3.30 meets them.
  'spec.cni.binDir': (inst, v) => v === cniDirectories(inst).bin,
  'spec.cni.confDir': (inst, v) => v === cniDirectories(inst).conf,
  // v1.36+: {policyMode: Default} on AKS only.
  'spec.azure': (inst, v) => inst.spec?.kubernetesProvider === 'AKS' && same(v, { policyMode: 'Default' }),
  // calicoNetwork.sysctl, proxy, the component overrides (calicoNodeDaemonSet, ...): the operator fills none of them.
};

/** The value at a concrete path such as `spec.calicoNetwork.ipPools[0].name` (undefined when absent). */
export function valueAt(obj: unknown, path: string): unknown {
  let node: any = obj;
  for (const seg of path.split('.')) {
    const m = /^([^[\]]+)((?:\[\d+\])*)$/.exec(seg);
    if (!m || node === null || typeof node !== 'object') return undefined;
    node = node[m[1]!];
    for (const [, i] of m[2]!.matchAll(/\[(\d+)\]/g)) node = Array.isArray(node) ? node[Number(i)] : undefined;
  }
  return node;
}

/** What 3.27's clientv3 setDefaults writes into a FelixConfiguration's two connect-time load balancing fields. */
function bpfCtlbDefaults(fc: KubeObject): { ctlb: string; natWithoutCtlb: string } {
  const enabled: unknown = fc.spec?.bpfConnectTimeLoadBalancingEnabled;
  if (enabled === undefined || enabled === null) return { ctlb: 'TCP', natWithoutCtlb: 'Enabled' };
  return { ctlb: enabled ? 'Enabled' : 'Disabled', natWithoutCtlb: 'Disabled' };
}

/**
 * Other kinds: values the newer release writes by itself into objects that an older release's CRD prunes. Such a
 * value is the newer release's default, not a user's setting, so pruning it on a downgrade loses nothing.
 * Read in projectcalico/calico v3.27.5, v3.30.7 and v3.32.1 and tigera/operator v1.38.13.
 */
type ObjectRule = (obj: KubeObject, value: unknown, installation: KubeObject | undefined) => boolean;
const OBJECT_RULES: Record<string, Record<string, ObjectRule>> = {
  IPPool: {
    // libcalico-go clientv3/ippool.go (create and update) and backend/k8s/resources/ippool.go set Automatic when
    // unset; the v1.38 operator writes its entries' default (ippool/defaults.go). Before 3.30 every pool is
    // Automatic, so only Manual is a setting a downgrade loses.
    'spec.assignmentMode': (_o, v) => v === 'Automatic',
  },
  IPAMBlock: {
    // 3.32: IPAM's own record of when the block's affinity was claimed (libcalico-go lib/ipam
    // ipam_block_reader_writer.go:299 sets it at the claim, :473 clears it; read as the zero time when absent). No
    // user writes IPAM blocks, and older releases have no use for it.
    'spec.affinityClaimTime': () => true,
  },
  IPAMConfig: {
    // 3.32: IPAM creates IPAMConfig default with Enabled when it reads none (lib/ipam/ipam.go GetIPAMConfig), and
    // the CNI plugin reads an unset value as Enabled (cni-plugin/pkg/ipamplugin/ipam_plugin.go:626).
    'spec.kubeVirtVMAddressPersistence': (_o, v) => v === 'Enabled',
  },
  BGPConfiguration: {
    // 3.31+: the CRD's structural default (api/pkg/apis/projectcalico/v3/bgpconfig.go "[Default: Enabled]"), so
    // every BGPConfiguration read under it has the field; Enabled is "the full CIDR range will be advertised
    // (default behavior)", what releases without the field do. Only Disabled is a setting a downgrade loses.
    'spec.serviceLoadBalancerAggregation': (_o, v) => v === 'Enabled',
  },
  BlockAffinity: {
    // libcalico-go backend/k8s/resources/ipam_affinity.go toV3 writes "host" for every node's affinity and reads an
    // unset type as "host", as every release before 3.30 means it; only "virtual" is a kind older releases lack.
    'spec.type': (_o, v) => v === 'host',
  },
  FelixConfiguration: {
    // 3.27's libcalico-go clientv3/felixconfig.go setDefaults, on every create and update of any FelixConfiguration
    // (calico-node's start-up creates default through it): TCP and Enabled when unset, or, when the deprecated
    // bpfConnectTimeLoadBalancingEnabled (which 3.26 has) is set, Enabled/Disabled from it and Disabled. The derived
    // values say nothing that boolean does not; 3.26 without them behaves as its own default.
    'spec.bpfConnectTimeLoadBalancing': (o, v) => v === bpfCtlbDefaults(o).ctlb,
    'spec.bpfHostNetworkedNATWithoutCTLB': (o, v) => v === bpfCtlbDefaults(o).natWithoutCtlb,
    // v1.36+ core_controller.go setNftablesMode (v1.36.16:1658, v1.38.13:1767): on FelixConfiguration default,
    // Enabled for the Nftables Linux dataplane and Disabled for any other (the operator's fillDefaults sets Iptables
    // when none is given). So 3.29 -> 3.28 meets it too.
    'spec.nftablesMode': (o, v, inst) =>
      inst !== undefined && o.metadata.name === 'default' && v === (linuxDataplane(inst) === 'Nftables' ? 'Enabled' : 'Disabled'),
  },
};

/**
 * Whether `obj`'s value at `path` (a field the target's CRD prunes) is what the newer release writes by itself
 * (`installation`: the live Installation default, when the operator runs Calico). For the Installation itself,
 * isOperatorDefault.
 */
export function isReleaseDefault(obj: KubeObject, path: string, installation: KubeObject | undefined): boolean {
  const rule = OBJECT_RULES[obj.kind]?.[folded(path)];
  return rule ? rule(obj, valueAt(obj, path), installation) : false;
}

/**
 * Whether the Installation's value at `path` is what the operator fills in by itself (safe to drop: the user did
 * not set it). `livePools` are the crd.projectcalico.org IPPools, which name the entries.
 */
export function isOperatorDefault(inst: KubeObject, path: string, livePools: KubeObject[]): boolean {
  const rule = RULES[folded(path)];
  return rule ? rule(inst, valueAt(inst, path), path, livePools) : false;
}
