/** What the restore e2e files share: a small but complete Calico datastore on the real cluster, and readers of its state. */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject, ResourceType } from '../../src/kube/types.js';
import { applyFixture, calicoType, operatorType, resetCalico, runCli, testClient } from './helpers.js';

export const T = {
  ippool: calicoType('ippools', 'IPPool'),
  ipreservation: calicoType('ipreservations', 'IPReservation'),
  ipamconfig: calicoType('ipamconfigs', 'IPAMConfig'),
  blockaffinity: calicoType('blockaffinities', 'BlockAffinity'),
  ipamblock: calicoType('ipamblocks', 'IPAMBlock'),
  ipamhandle: calicoType('ipamhandles', 'IPAMHandle'),
  felix: calicoType('felixconfigurations', 'FelixConfiguration'),
  bgpconfig: calicoType('bgpconfigurations', 'BGPConfiguration'),
  bgppeer: calicoType('bgppeers', 'BGPPeer'),
  gnp: calicoType('globalnetworkpolicies', 'GlobalNetworkPolicy'),
  np: calicoType('networkpolicies', 'NetworkPolicy', true),
  gns: calicoType('globalnetworksets', 'GlobalNetworkSet'),
  ns: calicoType('networksets', 'NetworkSet', true),
  hep: calicoType('hostendpoints', 'HostEndpoint'),
  clusterinfo: calicoType('clusterinformations', 'ClusterInformation'),
  installation: operatorType('installations', 'Installation'),
};
export const APP_NS = 'rst-app';
export const c = (kind: string, name: string, spec: unknown, ns?: string): KubeObject => ({
  apiVersion: 'crd.projectcalico.org/v1',
  kind,
  metadata: { name, ...(ns ? { namespace: ns } : {}) },
  spec,
});

/** A small but complete Calico datastore: pools (one disabled, not operator-managed), IPAM, BGP/Felix, sets, policies. */
export function population(): [ResourceType, KubeObject][] {
  return [
    [
      T.ippool,
      c('IPPool', 'default-ipv4-ippool', {
        cidr: '192.168.0.0/16',
        blockSize: 26,
        vxlanMode: 'CrossSubnet',
        ipipMode: 'Never',
        natOutgoing: true,
        nodeSelector: 'all()',
        allowedUses: ['Workload', 'Tunnel'],
      }),
    ],
    [
      T.ippool,
      c('IPPool', 'legacy-pool', {
        cidr: '10.200.0.0/16',
        blockSize: 26,
        vxlanMode: 'Never',
        ipipMode: 'Always',
        natOutgoing: true,
        disabled: true,
        nodeSelector: 'all()',
      }),
    ],
    [T.ipreservation, c('IPReservation', 'reserved', { reservedCIDRs: ['192.168.255.0/24'] })],
    [T.ipamconfig, c('IPAMConfig', 'default', { strictAffinity: false, autoAllocateBlocks: true, maxBlocksPerHost: 0 })],
    [T.blockaffinity, c('BlockAffinity', 'rst-node-1-192-168-10-0-26', { cidr: '192.168.10.0/26', node: 'rst-node-1', state: 'confirmed', deleted: 'false' })],
    [
      T.ipamblock,
      c('IPAMBlock', '192-168-10-0-26', {
        cidr: '192.168.10.0/26',
        affinity: 'host:rst-node-1',
        strictAffinity: false,
        allocations: [0, 1, ...Array.from({ length: 62 }, () => null)],
        unallocated: Array.from({ length: 62 }, (_, i) => i + 2),
        attributes: [
          { handle_id: 'vxlan-tunnel-addr-rst-node-1', secondary: { node: 'rst-node-1', type: 'vxlanTunnelAddress' } },
          {
            handle_id: 'k8s-pod-network.abc123',
            secondary: { namespace: APP_NS, node: 'rst-node-1', pod: 'web-0', timestamp: '2026-01-01 00:00:00 +0000 UTC' },
          },
        ],
        deleted: false,
        sequenceNumber: 7,
        sequenceNumberForAllocation: { '0': 1, '1': 2 },
      }),
    ],
    [T.ipamhandle, c('IPAMHandle', 'k8s-pod-network.abc123', { handleID: 'k8s-pod-network.abc123', block: { '192.168.10.0/26': 1 }, deleted: false })],
    [
      T.ipamhandle,
      c('IPAMHandle', 'vxlan-tunnel-addr-rst-node-1', { handleID: 'vxlan-tunnel-addr-rst-node-1', block: { '192.168.10.0/26': 1 }, deleted: false }),
    ],
    [T.felix, c('FelixConfiguration', 'default', { bpfEnabled: false, logSeverityScreen: 'Info', reportingInterval: '0s', vxlanVNI: 4096 })],
    [T.bgpconfig, c('BGPConfiguration', 'default', { asNumber: 64512, nodeToNodeMeshEnabled: false, logSeverityScreen: 'Info' })],
    [T.bgppeer, c('BGPPeer', 'tor-router', { peerIP: '10.0.0.1', asNumber: 64500 })],
    [T.gns, c('GlobalNetworkSet', 'blocked-ranges', { nets: ['198.51.100.0/24'] })],
    [T.ns, c('NetworkSet', 'partners', { nets: ['203.0.113.0/24'] }, APP_NS)],
    [T.hep, c('HostEndpoint', 'rst-node-1-eth0', { node: 'rst-node-1', interfaceName: 'eth0', expectedIPs: ['10.0.0.11'] })],
    [
      T.gnp,
      c('GlobalNetworkPolicy', 'default.deny-blocked', {
        order: 10,
        selector: 'all()',
        types: ['Egress'],
        egress: [{ action: 'Deny', destination: { selector: 'has(blocked)' } }],
      }),
    ],
    [
      T.gnp,
      c('GlobalNetworkPolicy', 'default.allow-dns', {
        order: 100,
        selector: 'all()',
        types: ['Egress'],
        egress: [{ action: 'Allow', protocol: 'UDP', destination: { ports: [53] } }],
      }),
    ],
    [
      T.np,
      c(
        'NetworkPolicy',
        'default.web',
        { selector: "app == 'web'", types: ['Ingress'], ingress: [{ action: 'Allow', protocol: 'TCP', destination: { ports: [80, 443] } }] },
        APP_NS,
      ),
    ],
  ];
}

export const id = (t: ResourceType, o: KubeObject) => `${t.kind} ${o.metadata.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata.name}`;

export async function populate(client: KubeClient): Promise<void> {
  await client.apply(K.namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: APP_NS } }, { fieldManager: 'rst-e2e' });
  for (const [t, o] of population()) await client.apply(t, o, { fieldManager: 'rst-e2e' });
  // What calico-node/the operator leave in ClusterInformation.
  await client.apply(
    T.clusterinfo,
    c('ClusterInformation', 'default', { calicoVersion: 'v3.28.1', clusterGUID: 'f0e1d2c3', clusterType: 'typha,kdd,k8s,operator,bgp', datastoreReady: true }),
    { fieldManager: 'rst-e2e' },
  );
}

export async function specs(client: KubeClient): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const t of [...new Set(population().map(([t]) => t)), T.clusterinfo, T.installation]) {
    for (const o of await client.listAll(t)) out[id(t, o)] = o.spec;
  }
  return out;
}

export async function resourceVersions(client: KubeClient): Promise<Record<string, string | undefined>> {
  const out: Record<string, string | undefined> = {};
  for (const t of [...new Set(population().map(([t]) => t)), T.clusterinfo, T.installation]) {
    for (const o of await client.listAll(t)) out[id(t, o)] = o.metadata.resourceVersion;
  }
  return out;
}

export async function operatorReplicas(client: KubeClient): Promise<number | undefined> {
  return (await client.get(K.deployment, 'tigera-operator', 'tigera-operator')).spec?.replicas;
}
export async function datastoreReady(client: KubeClient): Promise<unknown> {
  return (await client.getOrUndefined(T.clusterinfo, undefined, 'default'))?.spec?.datastoreReady;
}

/** Delete every Calico CRD, as `kubectl delete -f tigera-operator.yaml` does (the incident), and wait until they are gone. */
export async function deleteCalicoCrds(client: KubeClient): Promise<void> {
  const crds = (await client.listAll(K.crd)).filter((x) => ['crd.projectcalico.org', 'operator.tigera.io'].includes(x.spec.group));
  for (const x of crds) await client.delete(K.crd, undefined, x.metadata.name);
  await client.waitFor(
    'Calico CRDs to be gone',
    async () => ((await client.listAll(K.crd)).some((x) => ['crd.projectcalico.org', 'operator.tigera.io'].includes(x.spec.group)) ? undefined : true),
    { timeoutMs: 120_000 },
  );
}

export async function exportTo(dir: string, name: string): Promise<string> {
  const out = path.join(dir, name);
  const r = await runCli(['export', '--out', out]);
  expect(r.code, r.stderr).toBe(0);
  return out;
}

/** A client on a cluster reset to Calico 3.28.1 (operator install) holding the population. */
async function setUpRestoreCluster(): Promise<KubeClient> {
  const client = await testClient();
  await resetCalico(client);
  await client.delete(K.namespace, undefined, APP_NS);
  // Left by the other restore file: populate writes into it, which a namespace still terminating refuses.
  await client.waitFor(`namespace ${APP_NS} to be gone`, async () => ((await client.getOrUndefined(K.namespace, undefined, APP_NS)) ? undefined : true), {
    timeoutMs: 120_000,
  });
  await applyFixture(client, '3.28.1', 'tigera-operator.yaml');
  await applyFixture(client, '3.28.1', 'custom-resources.yaml');
  // The 3.28 operator writes name/allowedUses into the Installation pool entries itself (docs/calico-differences.md); kwok
  // runs no real operator, so do what it would.
  const inst = await client.get(T.installation, undefined, 'default');
  inst.spec.calicoNetwork.ipPools[0].allowedUses = ['Workload', 'Tunnel'];
  await client.replace(T.installation, inst);
  await populate(client);
  return client;
}

/** Sets a restore e2e file's cluster up before its tests (handing the client to `onClient`) and closes it after; returns a fresh working folder. */
export function restoreSuite(onClient: (client: KubeClient) => void): string {
  let client: KubeClient | undefined;
  beforeAll(async () => {
    client = await setUpRestoreCluster();
    onClient(client);
  });
  afterAll(() => client?.close());
  return mkdtempSync(path.join(os.tmpdir(), 'cnr-restore-'));
}
