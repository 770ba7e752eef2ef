/** Builders of in-memory CalicoStates for unit tests (and for plan/wrap tests that reuse the checks). */
import type { KubeObject } from '../../src/kube/types.js';
import type { CalicoState, PodInfo, WorkloadInfo } from '../../src/doctor/state.js';
import { KEYS } from '../../src/doctor/state.js';

const crdObj = (kind: string, name: string, spec: any, extra: Partial<KubeObject> = {}): KubeObject => ({
  apiVersion: kind === 'Installation' || kind === 'TigeraStatus' ? 'operator.tigera.io/v1' : 'crd.projectcalico.org/v1',
  kind,
  metadata: { name, ...(extra.metadata ?? {}) },
  spec,
  ...(extra.status ? { status: extra.status } : {}),
});

export const pool = (name: string, cidr: string, spec: any = {}, labels?: Record<string, string>): KubeObject =>
  crdObj(
    'IPPool',
    name,
    { cidr, blockSize: 26, ipipMode: 'Never', vxlanMode: 'CrossSubnet', natOutgoing: true, nodeSelector: 'all()', ...spec },
    { metadata: { name, labels } },
  );

/** An Installation as operator v1.34 leaves it (defaults filled in). */
/**
 * The finalizers the real v1.38.13 operator leaves on Installation `default` of a default 3.30 install (its
 * custom-resources.yaml creates Whisker and Goldmane; seen in test/e2e/calico-3307-downgrade.test.ts).
 */
export const V138_INSTALLATION_FINALIZERS = [
  'tigera.io/operator-cleanup',
  'operator.tigera.io/installation-controller',
  'operator.tigera.io/apiserver-controller',
  'operator.tigera.io/whisker-controller',
  'operator.tigera.io/goldmane-controller',
];

export const installationWith = (ipPools: any[] | undefined): KubeObject =>
  crdObj('Installation', 'default', { calicoNetwork: ipPools === undefined ? {} : { ipPools } });

export const entry = (name: string, cidr: string, extra: any = {}) => ({
  name,
  cidr,
  blockSize: 26,
  encapsulation: 'VXLANCrossSubnet',
  natOutgoing: 'Enabled',
  nodeSelector: 'all()',
  disableBGPExport: false,
  allowedUses: ['Workload', 'Tunnel'],
  ...extra,
});

/** A block with the given ordinals allocated; owners index the attributes. */
export const block = (
  cidr: string,
  node: string | undefined,
  allocs: { ordinal: number; handle: string; pod?: [string, string]; node?: string; type?: string }[],
): KubeObject => {
  const size = 64;
  const allocations: (number | null)[] = Array(size).fill(null);
  const attributes = allocs.map((a, i) => {
    allocations[a.ordinal] = i;
    return {
      handle_id: a.handle,
      secondary: a.pod ? { namespace: a.pod[0], pod: a.pod[1], node: a.node ?? node } : { node: a.node ?? node, type: a.type ?? 'vxlanTunnelAddress' },
    };
  });
  return crdObj('IPAMBlock', cidr.replace(/[./:]/g, '-'), {
    cidr,
    affinity: node ? `host:${node}` : undefined,
    allocations,
    attributes,
    unallocated: [],
    strictAffinity: false,
  });
};

export const handle = (id: string, blockCidr: string): KubeObject => crdObj('IPAMHandle', id.toLowerCase(), { handleID: id, block: { [blockCidr]: 1 } });
export const affinity = (node: string, cidr: string): KubeObject =>
  crdObj('BlockAffinity', `${node}-${cidr.replace(/[./]/g, '-')}`, { node, cidr, state: 'confirmed', deleted: 'false' });

export const podAt = (ns: string, name: string, node: string, ip: string, extra: Partial<PodInfo> = {}): PodInfo => ({
  namespace: ns,
  name,
  node,
  phase: 'Running',
  hostNetwork: false,
  podIPs: [ip],
  calicoAnnotations: {},
  ...extra,
});

export const operatorWorkload = (tag: string): WorkloadInfo => ({
  kind: 'Deployment',
  namespace: 'tigera-operator',
  name: 'tigera-operator',
  image: `quay.io/tigera/operator:${tag}`,
  desired: 1,
  ready: 1,
});
export const calicoNode = (tag: string, ready = 2, desired = 2): WorkloadInfo => ({
  kind: 'DaemonSet',
  namespace: 'calico-system',
  name: 'calico-node',
  image: `docker.io/calico/node:${tag}`,
  desired,
  ready,
});

const IPPOOL_CRD_STUB: KubeObject = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: 'ippools.crd.projectcalico.org' },
  spec: {
    group: 'crd.projectcalico.org',
    names: { kind: 'IPPool', plural: 'ippools' },
    scope: 'Cluster',
    versions: [{ name: 'v1', served: true, storage: true }],
  },
};

export function makeState(
  parts: { objects?: KubeObject[]; crds?: KubeObject[]; nodes?: string[]; pods?: PodInfo[]; workloads?: WorkloadInfo[]; withIpam?: boolean } = {},
): CalicoState {
  const objects: Record<string, KubeObject[]> = {};
  const keyOf: Record<string, string> = {
    IPPool: KEYS.ipPools,
    IPAMBlock: KEYS.ipamBlocks,
    IPAMHandle: KEYS.ipamHandles,
    BlockAffinity: KEYS.blockAffinities,
    ClusterInformation: KEYS.clusterInformations,
    Installation: KEYS.installations,
    TigeraStatus: KEYS.tigeraStatuses,
  };
  if (parts.withIpam !== false) objects[KEYS.ipPools] = [];
  for (const o of parts.objects ?? []) (objects[keyOf[o.kind] ?? `${o.kind.toLowerCase()}s.x`] ??= []).push(o);
  const workloads = parts.workloads ?? [];
  return {
    source: { type: 'cluster', server: 'https://127.0.0.1:1' },
    objects,
    // A state with IPAM has the IPPool CRD (a stub: the checks only look at group and kind).
    crds: [...(parts.crds ?? []), ...(parts.withIpam !== false ? [IPPOOL_CRD_STUB] : [])],
    nodes: (parts.nodes ?? ['n1', 'n2']).map((name) => ({ name, ready: true })),
    pods: parts.pods ?? [],
    workloads,
    installType: workloads.some((w) => w.name === 'tigera-operator') ? 'operator' : 'manifest',
  };
}

/** The Installation as the 3.28 operator (v1.34) leaves it: its defaults name, allowedUses and the policy setup timeout 0. */
export const installation328 = (
  pools = [
    {
      name: 'default-ipv4-ippool',
      cidr: '192.168.0.0/16',
      blockSize: 26,
      encapsulation: 'VXLANCrossSubnet',
      natOutgoing: 'Enabled',
      nodeSelector: 'all()',
      allowedUses: ['Workload', 'Tunnel'],
    },
  ],
): KubeObject => ({
  apiVersion: 'operator.tigera.io/v1',
  kind: 'Installation',
  metadata: { name: 'default' },
  spec: { calicoNetwork: { ipPools: pools, linuxPolicySetupTimeoutSeconds: 0 }, variant: 'Calico', cni: { type: 'Calico', ipam: { type: 'Calico' } } },
});
