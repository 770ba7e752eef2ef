/** What the restore e2e files share: a small but complete Calico datastore on the real cluster and Calico's real programs, and readers of its state. */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { CALICO_PROGRAMS_VERSION, ensureCalicoProgram } from '../../src/dev/local-cluster/calico-programs.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject, ResourceType } from '../../src/kube/types.js';
import type { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { until } from '../support/until.js';
import { calicoctl, installReal328, waitPoolAndDatastoreReady, withRealCalico } from './calico-support.js';
import { calicoType, operatorType, runCli } from './helpers.js';
import { heldByLog, readEvents, readIpam, startChurn, stopAllChurns, type DriverEvent, type IpamCheck } from './ipam-support.js';
import { DRIVER_NS, podsForDriverAllocations } from './driver-pods.js';
import { expectChurnSettledAndHeld, PodChurn, stopAllPodChurns, waitNodeSideSettled } from './pod-churn.js';
import { expectNodeTunnelsKept, waitNodeTunnels, type TunnelAddrs } from './tunnel-support.js';

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

/**
 * The configuration part of a small but complete Calico datastore (BGP/Felix, sets, policies, a reservation). The
 * pools and IPAM come from the real programs (`populate`): default-ipv4-ippool from the operator, legacy-pool
 * through the v3 API, blocks, handles and affinities from the IPAM driver.
 */
export function population(): [ResourceType, KubeObject][] {
  return [
    [T.ipreservation, c('IPReservation', 'reserved', { reservedCIDRs: ['192.168.255.0/24'] })],
    [T.ipamconfig, c('IPAMConfig', 'default', { strictAffinity: false, autoAllocateBlocks: true, maxBlocksPerHost: 0 })],
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

/** Every kind the restore tests compare: the population's, the pools and IPAM the real programs write, ClusterInformation, Installation. */
const COMPARED = [T.ippool, T.blockaffinity, T.ipamblock, T.ipamhandle, ...new Set(population().map(([t]) => t)), T.clusterinfo, T.installation];

export const id = (t: ResourceType, o: KubeObject) => `${t.kind} ${o.metadata.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata.name}`;

/**
 * The configuration part of the population on a running Calico 3.28.1: legacy-pool created disabled through the v3
 * API (calicoctl, so its metadata is where Calico keeps it) and the configuration objects.
 */
async function populateConfig(client: KubeClient): Promise<void> {
  await client.apply(K.namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: APP_NS } }, { fieldManager: 'rst-e2e' });
  const legacy = { cidr: '10.200.0.0/16', blockSize: 26, vxlanMode: 'Never', ipipMode: 'Always', natOutgoing: true, disabled: true, nodeSelector: 'all()' };
  await calicoctl(
    ['create', '-f', '-'],
    JSON.stringify({ apiVersion: 'projectcalico.org/v3', kind: 'IPPool', metadata: { name: 'legacy-pool' }, spec: legacy }),
  );
  for (const [t, o] of population()) await client.apply(t, o, { fieldManager: 'rst-e2e' });
}

/**
 * The population on a running Calico 3.28.1: `populateConfig`, and real allocations by the IPAM driver on both
 * nodes (their log, `DriverEvent`s, says which handle holds which address).
 */
export async function populate(client: KubeClient, nodes: string[], log: string): Promise<DriverEvent[]> {
  await populateConfig(client);
  const churn = await startChurn(log, { nodes, prefix: `rst${Date.now().toString(36)}`, rate: 8, target: 6, durationS: 5 });
  expect(await churn.done).toBe(0);
  const evs = readEvents(log);
  expect(heldByLog(evs).size).toBeGreaterThanOrEqual(3);
  return evs;
}

export async function specs(client: KubeClient): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const t of COMPARED) {
    for (const o of await client.listAll(t)) out[id(t, o)] = o.spec;
  }
  return out;
}

export async function resourceVersions(client: KubeClient): Promise<Record<string, string | undefined>> {
  const out: Record<string, string | undefined> = {};
  for (const t of COMPARED) {
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

/**
 * Delete every Calico CRD, as `kubectl delete -f tigera-operator.yaml` does (the incident), while the real operator
 * runs: the Calico kinds go at once; the Installation (and APIServer) stay Terminating on the operator's finalizers
 * while it tears Calico down (restore-operator.test.ts), so only the first are waited for.
 */
export async function deleteCalicoCrds(client: KubeClient): Promise<void> {
  const crds = (await client.listAll(K.crd)).filter((x) => ['crd.projectcalico.org', 'operator.tigera.io'].includes(x.spec.group));
  for (const x of crds) await client.delete(K.crd, undefined, x.metadata.name);
  await client.waitFor(
    'the crd.projectcalico.org CRDs to be gone and the Installation to be deleting',
    async () => {
      if ((await client.listAll(K.crd)).some((x) => x.spec.group === 'crd.projectcalico.org')) return undefined;
      const inst = await client.getOrUndefined(T.installation, undefined, 'default').catch(() => undefined);
      return !inst || inst.metadata.deletionTimestamp ? true : undefined;
    },
    { timeoutMs: 120_000 },
  );
}

export async function exportTo(dir: string, name: string): Promise<string> {
  const out = path.join(dir, name);
  const r = await runCli(['export', '--out', out]);
  expect(r.code, r.stderr).toBe(0);
  return out;
}

export interface RestoreSuite {
  /** A fresh working folder for bundles and logs. */
  work: string;
  real: ReturnType<typeof withRealCalico>;
  /** The IPAM driver's log of the allocations `populate` made (without the node side). */
  driverLog: string;
  /** Its events, read after the set-up (without the node side). */
  events: () => DriverEvent[];
  /** With the node side: the pods the CNI plugin gave addresses to in the set-up (`podsThroughCni`). */
  pods: () => PodChurn;
  /** With the node side: each node's tunnel addresses, from calico-node's own allocator. */
  tunnels: () => TunnelAddrs[];
}

/**
 * A restore e2e file's set-up, once per file: Calico's real programs (withRealCalico, kwok nodes `<prefix>-node-N`),
 * Calico 3.28.1 installed as its docs say under the real v1.34.3 operator, then the population. Without `nodeSide`
 * its allocations come from the IPAM driver (`populate`); with it (the Calico trees of each calico-node minor the
 * file installs, v3.28.1 first), Calico's node side runs
 * (docs/node-side.md): each node's tunnel address comes from calico-node's allocator and the allocations from real
 * Pods through the CNI plugin (`podsThroughCni`, in namespace `<prefix>-pods-<run>`).
 */
export function restoreSuite(
  prefix: string,
  onClient: (client: KubeClient) => void,
  opts: { nodeSide?: string[]; /** Without the node side: a Pod object for each driver allocation (podsForDriverAllocations). */ driverPods?: boolean } = {},
): RestoreSuite {
  const real = opts.nodeSide
    ? withRealCalico(prefix, { operators: ['v1.32.10', 'v1.34.3'], calico: [CALICO_PROGRAMS_VERSION], nodeSide: opts.nodeSide })
    : withRealCalico(prefix);
  const work = mkdtempSync(path.join(os.tmpdir(), 'cnr-restore-'));
  const driverLog = path.join(work, 'driver.jsonl');
  const nodes = [`${prefix}-node-1`, `${prefix}-node-2`];
  const run = Date.now().toString(36);
  const podsNs = `${prefix}-pods-${run}`;
  let evs: DriverEvent[] | undefined;
  let pods: PodChurn | undefined;
  let tunnels: TunnelAddrs[] | undefined;
  beforeAll(async () => {
    const client = real.client();
    onClient(client);
    if (!opts.nodeSide) await ensureCalicoProgram('ipam-driver', CALICO_PROGRAMS_VERSION);
    await client.delete(K.namespace, undefined, APP_NS);
    // Left by the other restore file: populate writes into it, which a namespace still terminating refuses.
    await client.waitFor(`namespace ${APP_NS} to be gone`, async () => ((await client.getOrUndefined(K.namespace, undefined, APP_NS)) ? undefined : true), {
      timeoutMs: 120_000,
    });
    await installReal328(client, real.cluster);
    await waitPoolAndDatastoreReady(client);
    if (!opts.nodeSide) {
      evs = await populate(client, nodes, driverLog);
      if (opts.driverPods) await podsForDriverAllocations(client, evs, DRIVER_NS);
      return;
    }
    await populateConfig(client);
    // calico-node's start on each node: a VXLAN tunnel address from default-ipv4-ippool (legacy-pool is disabled).
    tunnels = await waitNodeTunnels(real.cluster, nodes);
    pods = await podsThroughCni(client, real.cluster, { nodes, namespace: podsNs, prefix: `${prefix}${run}`, count: 6 });
  }, 30 * 60_000);
  if (opts.nodeSide) afterEach(() => stopAllPodChurns());
  // Runs before withRealCalico's own afterAll (hooks run in reverse): the pods go before the node side stops.
  afterAll(async () => {
    await stopAllChurns();
    await stopAllPodChurns();
    const client = real.client();
    await client.delete(K.namespace, undefined, APP_NS).catch(() => undefined);
    if (opts.nodeSide) await client.delete(K.namespace, undefined, podsNs).catch(() => undefined);
    if (opts.driverPods) await client.delete(K.namespace, undefined, DRIVER_NS).catch(() => undefined);
  });
  const got = <V>(v: V | undefined, what: string): V => {
    if (v === undefined) throw new Error(`the restore set-up has not run or made no ${what}`);
    return v;
  };
  return { work, real, driverLog, events: () => got(evs, 'driver events'), pods: () => got(pods, 'pods'), tunnels: () => got(tunnels, 'tunnels') };
}

/**
 * Real allocations as the CNI plugin makes them, for a file with the node side running: real Pods created and
 * deleted on `nodes` (test/e2e/pod-churn.ts, a namespace of its own) until `count` pods were addressed and at least
 * one deleted pod released by its DEL, then the churn stopped and settled and judged (`expectChurnSettledAndHeld`).
 * The churn's live pods are the addresses IPAM must keep from then on; its released handles must stay released.
 */
export async function podsThroughCni(
  client: KubeClient,
  cluster: LocalCluster,
  opts: { nodes: string[]; namespace: string; prefix: string; count: number },
): Promise<PodChurn> {
  const churn = await PodChurn.start(client, cluster, { ...opts, target: opts.count, intervalMs: 1000 });
  await until(`${opts.count} pods addressed and one released`, () => churn.counts().addressed >= opts.count && churn.counts().released >= 1, {
    timeoutMs: 180_000,
    intervalMs: 250,
    state: () => JSON.stringify(churn.counts()),
  });
  await churn.stop();
  await expectChurnSettledAndHeld(client, cluster, churn);
  return churn;
}

/**
 * After a restore, with the node side running: the churn's pods (none created or deleted since it stopped) each
 * still show the address the CNI plugin gave them and hold it in IPAM by their own handle, whose IPAMHandle records
 * it once; the checks of `expectChurnSettledAndHeld` (every running pod's address held, none twice, no pod-network
 * allocation without a pod, `calicoctl ipam check` with no problem at all); each node's tunnel address kept.
 */
export async function expectPodsKept(client: KubeClient, cluster: LocalCluster, churn: PodChurn, tunnels: TunnelAddrs[]): Promise<IpamCheck> {
  const before = churn.live().map((p) => [p.name, p.ip, p.handle]);
  await churn.settle();
  await waitNodeSideSettled(client, cluster, churn.opts.nodes);
  expect(await unusedAllocations(client), 'allocations no pod or Node uses (a restore put back what Calico had released?)').toEqual([]);
  const check = await expectChurnSettledAndHeld(client, cluster, churn);
  const now = (await client.listAll<KubeObject>(K.pod, { namespace: churn.opts.namespace })).filter((p) => !p.metadata.deletionTimestamp);
  const shown = new Map(now.map((p) => [p.metadata.name, p.metadata.annotations?.['cni.projectcalico.org/podIP']?.split('/')[0]]));
  expect(before.map(([name]) => [name, shown.get(name!)])).toEqual(before.map(([name, ip]) => [name, ip]));
  const ipam = await readIpam(client);
  const wrong = before.flatMap(([name, ip, handle]) => {
    const recorded = Object.values(ipam.handles.get(handle!) ?? {}).reduce((a, n) => a + n, 0);
    const owners = ipam.owners.get(ip!) ?? [];
    return [
      ...(owners.join() === handle ? [] : [`${name}: ${ip} allocated to ${owners.join(', ') || 'nobody'}, not ${handle}`]),
      ...(recorded === 1 ? [] : [`${name}: IPAMHandle ${handle} records ${recorded} addresses, not 1`]),
    ];
  });
  expect(wrong).toEqual([]);
  expect(check.nodeTunnelIps, check.text).toBe(tunnels.length);
  await expectNodeTunnelsKept(client, tunnels);
  return check;
}

/**
 * Allocations in IPAM that nothing uses, named from the blocks' own attributes: a pod-network allocation whose pod
 * (by the CNI plugin's containerID) no longer exists, and a tunnel handle holding more than one address or an address
 * its Node does not name.
 */
async function unusedAllocations(client: KubeClient): Promise<string[]> {
  const pods = await client.listAll<KubeObject>(K.pod);
  const containers = new Set(pods.map((p) => p.metadata.annotations?.['cni.projectcalico.org/containerID']).filter(Boolean));
  const named = new Map<string, string>();
  for (const n of await client.listAll<KubeObject>(K.node))
    for (const [k, v] of Object.entries(n.metadata.annotations ?? {}))
      if (/^projectcalico\.org\/IPv4(VXLAN|IPIP)TunnelAddr$/.test(k))
        named.set(`${k.includes('VXLAN') ? 'vxlan' : 'ipip'}-tunnel-addr-${n.metadata.name}`, v.split('/')[0]!);
  const out: string[] = [];
  const tunnelAddrs = new Map<string, string[]>();
  for (const b of await client.listAll(T.ipamblock)) {
    const [base] = (b.spec.cidr as string).split('/');
    const start = base!.split('.').reduce((a, o) => a * 256 + Number(o), 0);
    const attrs: { handle_id?: string; secondary?: Record<string, string> }[] = b.spec.attributes ?? [];
    ((b.spec.allocations ?? []) as (number | null)[]).forEach((a, ordinal) => {
      if (a === null || a === undefined) return;
      const ip = [24, 16, 8, 0].map((sh) => Math.floor((start + ordinal) / 2 ** sh) % 256).join('.');
      const attr = attrs[a] ?? {};
      const handle = attr.handle_id ?? '';
      if (handle.startsWith('k8s-pod-network.') && !containers.has(handle.slice('k8s-pod-network.'.length)))
        out.push(`${ip} of ${handle.slice(0, 30)}...: pod ${attr.secondary?.namespace}/${attr.secondary?.pod} is gone`);
      if (handle.includes('-tunnel-addr-')) tunnelAddrs.set(handle, [...(tunnelAddrs.get(handle) ?? []), ip]);
    });
  }
  for (const [handle, ips] of tunnelAddrs)
    if (ips.length !== 1 || ips[0] !== named.get(handle)) out.push(`${handle} holds ${ips.join(', ')}; its Node names ${named.get(handle) ?? 'none'}`);
  return out;
}
