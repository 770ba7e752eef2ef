/**
 * A realistic Calico population for e2e tests (shared by the e2e files): several IP pools (one disabled),
 * IPAM blocks/handles/affinities that agree with each other, IPAMConfig, Calico and global policies, network
 * sets, BGP and Felix configuration, plus the Installation and APIServer of custom-resources.yaml.
 * Needs the Calico CRDs installed first (applyFixture(client, '3.28.1', 'tigera-operator.yaml')).
 */
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { pool } from '../../src/util/pool.js';
import { resourceKey, type KubeObject, type ResourceType } from '../../src/kube/types.js';
import { applyFixture, calicoType } from './helpers.js';

export interface PopulateOptions {
  /** Name prefix of everything created (default `pop`). */
  prefix?: string;
  /** Nodes that IPAM blocks are affine to (names only; the Node objects are not created). Default 3 nodes. */
  nodes?: string[];
  /** Extra IPAM handles beyond one per allocated address (to make large populations). Default 0. */
  extraHandles?: number;
  /** Apply custom-resources.yaml of this Calico version (Installation + APIServer). Default '3.28.1'; false to skip. */
  customResources?: string | false;
  /** Namespace for namespaced objects (created when missing). Default `<prefix>-app`. */
  namespace?: string;
  fieldManager?: string;
}

export interface Population {
  /** Every object created, as applied. */
  objects: KubeObject[];
  /** Objects created per resource, keyed `<plural>.<group>`. */
  counts: Record<string, number>;
  namespace: string;
  /** The disabled pool's name. */
  disabledPool: string;
}

const T = {
  ippool: calicoType('ippools', 'IPPool'),
  block: calicoType('ipamblocks', 'IPAMBlock'),
  handle: calicoType('ipamhandles', 'IPAMHandle'),
  affinity: calicoType('blockaffinities', 'BlockAffinity'),
  ipamConfig: calicoType('ipamconfigs', 'IPAMConfig'),
  netpol: calicoType('networkpolicies', 'NetworkPolicy', true),
  gnp: calicoType('globalnetworkpolicies', 'GlobalNetworkPolicy'),
  netset: calicoType('networksets', 'NetworkSet', true),
  gnetset: calicoType('globalnetworksets', 'GlobalNetworkSet'),
  bgpConfig: calicoType('bgpconfigurations', 'BGPConfiguration'),
  bgpPeer: calicoType('bgppeers', 'BGPPeer'),
  felix: calicoType('felixconfigurations', 'FelixConfiguration'),
} as const;

const v1 = 'crd.projectcalico.org/v1';

export async function populateCalico(client: KubeClient, opts: PopulateOptions = {}): Promise<Population> {
  const prefix = opts.prefix ?? 'pop';
  const ns = opts.namespace ?? `${prefix}-app`;
  const nodes = opts.nodes ?? [1, 2, 3].map((i) => `${prefix}-node-${i}`);
  const fieldManager = opts.fieldManager ?? 'cni-rewind-e2e';
  const items: [ResourceType, KubeObject][] = [];
  const add = (t: ResourceType, kind: string, name: string, spec: unknown, extra: Partial<KubeObject['metadata']> = {}) =>
    items.push([t, { apiVersion: v1, kind, metadata: { name, ...extra }, spec }]);

  await client.apply(K.namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } }, { fieldManager });

  const disabledPool = `${prefix}-pool-disabled`;
  add(T.ippool, 'IPPool', `${prefix}-pool-a`, {
    cidr: '10.240.0.0/16',
    blockSize: 26,
    ipipMode: 'Never',
    vxlanMode: 'CrossSubnet',
    natOutgoing: true,
    nodeSelector: 'all()',
    allowedUses: ['Workload', 'Tunnel'],
  });
  add(T.ippool, 'IPPool', disabledPool, {
    cidr: '10.241.0.0/16',
    blockSize: 26,
    ipipMode: 'Never',
    vxlanMode: 'Never',
    natOutgoing: true,
    disabled: true,
    nodeSelector: 'all()',
  });
  add(T.ippool, 'IPPool', `${prefix}-pool-v6`, { cidr: 'fd00:240::/122', blockSize: 122, ipipMode: 'Never', vxlanMode: 'Never', nodeSelector: 'all()' });

  // One /26 block per node in pool-a, affine to it, with a few addresses allocated, each through a handle.
  nodes.forEach((node, i) => {
    const cidr = `10.240.${i}.0/26`;
    const used = 3;
    const handles = Array.from({ length: used }, (_, j) => `k8s-pod-network.${prefix}${i}c${j}${'0'.repeat(40)}`.slice(0, 64));
    add(T.block, 'IPAMBlock', `10-240-${i}-0-26`, {
      cidr,
      affinity: `host:${node}`,
      strictAffinity: false,
      allocations: Array.from({ length: 64 }, (_, k) => (k < used ? k : null)),
      unallocated: Array.from({ length: 64 - used }, (_, k) => k + used),
      // One pod per allocation (the handle's last characters are its zero padding, the same for all).
      attributes: handles.map((h, j) => ({ handle_id: h, secondary: { namespace: ns, node, pod: `${prefix}-pod-${i}-${j}` } })),
      deleted: false,
    });
    add(T.affinity, 'BlockAffinity', `${node}-10-240-${i}-0-26`, { cidr, node, state: 'confirmed', deleted: 'false' });
    for (const h of handles) add(T.handle, 'IPAMHandle', h.toLowerCase().replace(/[^a-z0-9.-]/g, '-'), { handleID: h, block: { [cidr]: 1 }, deleted: false });
  });
  for (let k = 0; k < (opts.extraHandles ?? 0); k++) {
    const h = `${prefix}-extra-${String(k).padStart(7, '0')}`;
    add(T.handle, 'IPAMHandle', h, { handleID: h, block: { '10.240.0.0/26': 1 }, deleted: false });
  }
  add(T.ipamConfig, 'IPAMConfig', 'default', { strictAffinity: false, autoAllocateBlocks: true, maxBlocksPerHost: 0 });

  add(
    T.netpol,
    'NetworkPolicy',
    `${prefix}-allow-dns`,
    { selector: 'all()', types: ['Egress'], egress: [{ action: 'Allow', protocol: 'UDP', destination: { ports: [53] } }] },
    { namespace: ns },
  );
  add(
    T.netpol,
    'NetworkPolicy',
    `${prefix}-deny-db`,
    { selector: "app == 'db'", order: 100, types: ['Ingress'], ingress: [{ action: 'Deny' }] },
    { namespace: ns },
  );
  add(T.gnp, 'GlobalNetworkPolicy', `${prefix}-deny-metadata`, {
    selector: 'all()',
    order: 10,
    types: ['Egress'],
    egress: [{ action: 'Deny', destination: { nets: ['169.254.169.254/32'] } }, { action: 'Allow' }],
  });
  add(T.netset, 'NetworkSet', `${prefix}-partners`, { nets: ['198.51.100.0/24'] }, { namespace: ns, labels: { role: 'partner' } });
  add(T.gnetset, 'GlobalNetworkSet', `${prefix}-blocklist`, { nets: ['203.0.113.0/24', '192.0.2.0/24'] }, { labels: { role: 'blocked' } });
  add(T.bgpConfig, 'BGPConfiguration', 'default', {
    asNumber: 64512,
    nodeToNodeMeshEnabled: false,
    logSeverityScreen: 'Info',
    serviceClusterIPs: [{ cidr: '10.96.0.0/12' }],
  });
  add(T.bgpPeer, 'BGPPeer', `${prefix}-tor`, { peerIP: '192.0.2.1', asNumber: 64513, nodeSelector: 'all()' });
  add(T.felix, 'FelixConfiguration', 'default', { bpfEnabled: false, logSeverityScreen: 'Info', reportingInterval: '0s', vxlanVNI: 4096 });

  await pool(items, 16, async ([t, o]) => {
    await client.apply(t, o, { fieldManager });
  });
  const objects = items.map(([, o]) => o);
  const counts: Record<string, number> = {};
  for (const [t] of items) counts[resourceKey(t)] = (counts[resourceKey(t)] ?? 0) + 1;
  if (opts.customResources !== false) {
    const crs = await applyFixture(client, opts.customResources ?? '3.28.1', 'custom-resources.yaml');
    for (const o of crs) {
      objects.push(o);
      const key = `${o.kind.toLowerCase()}s.${o.apiVersion.split('/')[0]}`;
      counts[key] = (counts[key] ?? 0) + 1;
    }
  }
  return { objects, counts, namespace: ns, disabledPool };
}
