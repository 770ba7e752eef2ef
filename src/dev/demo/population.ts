import type { KubeClient } from '../../kube/client.js';
import { IPAM_TYPES } from '../../calico/ipam-types.js';
import { K } from '../../kube/builtin.js';
import type { KubeObject, ResourceType } from '../../kube/types.js';

/**
 * The demo's Calico population besides the pools (created through projectcalico.org/v3 by actions.ts), as the
 * incident's cluster had it: workloads whose addresses IPAM records (blocks, handles, affinities consistent with
 * the pods kwok runs, as Calico's CNI plugin would have written them: no CNI plugin runs here), policies, BGP and
 * Felix configuration.
 */
const calico = (plural: string, kind: string, namespaced = false): ResourceType => ({
  group: 'crd.projectcalico.org',
  version: 'v1',
  plural,
  kind,
  namespaced,
});
export const CALICO_TYPES = {
  ippool: calico('ippools', 'IPPool'),
  ipamConfig: calico('ipamconfigs', 'IPAMConfig'),
  ipamBlock: IPAM_TYPES.block,
  ipamHandle: IPAM_TYPES.handle,
  blockAffinity: IPAM_TYPES.affinity,
  clusterInfo: calico('clusterinformations', 'ClusterInformation'),
  felix: calico('felixconfigurations', 'FelixConfiguration'),
  bgp: calico('bgpconfigurations', 'BGPConfiguration'),
  gnp: calico('globalnetworkpolicies', 'GlobalNetworkPolicy'),
  np: calico('networkpolicies', 'NetworkPolicy', true),
  gns: calico('globalnetworksets', 'GlobalNetworkSet'),
};

const obj = (kind: string, name: string, spec: unknown, extra: Partial<KubeObject['metadata']> = {}): KubeObject => ({
  apiVersion: 'crd.projectcalico.org/v1',
  kind,
  metadata: { name, ...extra },
  spec,
});

export const DEMO_NAMESPACE = 'demo-app';

export async function createDemoPopulation(client: KubeClient): Promise<Record<string, number>> {
  const T = CALICO_TYPES;
  const created: Record<string, number> = {};
  const put = async (t: ResourceType, o: KubeObject) => {
    await client.apply(t, o, { fieldManager: 'cni-rewind-demo' });
    created[o.kind] = (created[o.kind] ?? 0) + 1;
  };
  await put(T.ipamConfig, obj('IPAMConfig', 'default', { autoAllocateBlocks: true, strictAffinity: false, maxBlocksPerHost: 0 }));
  await put(T.felix, obj('FelixConfiguration', 'default', { bpfEnabled: false, logSeverityScreen: 'Info', reportingInterval: '0s', vxlanEnabled: true }));
  await put(T.bgp, obj('BGPConfiguration', 'default', { asNumber: 64512, logSeverityScreen: 'Info', nodeToNodeMeshEnabled: true }));
  await put(T.gns, obj('GlobalNetworkSet', 'metadata-endpoints', { nets: ['169.254.169.254/32'] }, { labels: { role: 'metadata' } }));
  await put(
    T.gnp,
    obj('GlobalNetworkPolicy', 'deny-metadata-egress', {
      order: 100,
      selector: 'all()',
      types: ['Egress'],
      egress: [{ action: 'Deny', destination: { selector: "role == 'metadata'" } }, { action: 'Allow' }],
    }),
  );

  // Workloads: a Deployment whose pods kwok runs and gives addresses from 10.244.0.0/16 (new-pool).
  await client.apply(K.namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: DEMO_NAMESPACE } }, { fieldManager: 'cni-rewind-demo' });
  await put(T.np, {
    ...obj('NetworkPolicy', 'allow-frontend', {
      order: 10,
      selector: "app == 'web'",
      types: ['Ingress'],
      ingress: [{ action: 'Allow', protocol: 'TCP', destination: { ports: [80] } }],
    }),
    metadata: { name: 'allow-frontend', namespace: DEMO_NAMESPACE },
  });
  await client.apply(
    K.deployment,
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web', namespace: DEMO_NAMESPACE },
      spec: {
        replicas: 4,
        selector: { matchLabels: { app: 'web' } },
        template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'web', image: 'nginx:1.27' }] } },
      },
    },
    { fieldManager: 'cni-rewind-demo' },
  );
  const pods = await client.waitFor(
    'demo pods to get addresses',
    async () => {
      const ps = await client.listAll(K.pod, { namespace: DEMO_NAMESPACE });
      return ps.length === 4 && ps.every((p) => p.status?.podIP && p.spec?.nodeName) ? ps : undefined;
    },
    { timeoutMs: 120_000 },
  );

  // IPAM that matches the pods: one /26 block per address range in use, affine to the first node using it.
  const blocks = new Map<string, { node: string; cidr: string; allocations: (number | null)[]; attributes: any[] }>();
  for (const p of pods) {
    const ip: string = p.status.podIP;
    const octets = ip.split('.').map(Number) as [number, number, number, number];
    const base = octets[3] - (octets[3] % 64);
    const cidr = `${octets[0]}.${octets[1]}.${octets[2]}.${base}/26`;
    let b = blocks.get(cidr);
    if (!b) {
      b = { node: p.spec.nodeName, cidr, allocations: Array(64).fill(null), attributes: [] };
      blocks.set(cidr, b);
    }
    const handle = `k8s-pod-network.${p.metadata.uid!.replace(/-/g, '')}`;
    b.allocations[octets[3] - base] = b.attributes.length;
    b.attributes.push({ handle_id: handle, secondary: { namespace: p.metadata.namespace, pod: p.metadata.name, node: p.spec.nodeName } });
    await put(T.ipamHandle, obj('IPAMHandle', handle, { handleID: handle, block: { [cidr]: 1 }, deleted: false }));
  }
  for (const b of blocks.values()) {
    const name = b.cidr.replace(/[./]/g, '-');
    const unallocated = b.allocations.map((a, i) => (a === null ? i : -1)).filter((i) => i >= 0);
    await put(
      T.ipamBlock,
      obj('IPAMBlock', name, {
        cidr: b.cidr,
        affinity: `host:${b.node}`,
        allocations: b.allocations,
        unallocated,
        attributes: b.attributes,
        strictAffinity: false,
        deleted: false,
      }),
    );
    await put(T.blockAffinity, obj('BlockAffinity', `${b.node}-${name}`, { state: 'confirmed', node: b.node, cidr: b.cidr, deleted: 'false' }));
  }
  return created;
}
