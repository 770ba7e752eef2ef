/**
 * `restore --resources` under a running real tigera operator (v1.34.3, Calico 3.28.1) with Calico's node side
 * running (calico-node's start-up and tunnel allocator per kwok node, the real CNI plugin per pod:
 * docs/node-side.md), judged by what the operator did: Calico installed through the operator, a user pool parked
 * (disabled, not the operator's), real Pods given their addresses by the CNI plugin (and one deleted, its address
 * released by its DEL), an export, then the incident: every Calico CRD deleted while the operator runs, which leaves
 * the Installation Terminating on the operator's finalizers while it tears Calico down (calico-node's pods go, and
 * with them its allocators; the operator's own pods on the nodes go and their DELs wait for Calico to come back).
 * The restore must let that teardown finish and then bring Calico back: the resumed operator's own TigeraStatus
 * reports (written after it restarted, not the stale ones) Available, the Installation not Terminating, calico-node
 * rendered and started again on every node, the pools as in the bundle (the parked one stays disabled through the
 * operator's reconciles), every pod holding its address by its own handle again, nothing released held again (the
 * teardown's pods' addresses, a node's old tunnel address), each node's tunnel handle holding the one address its
 * Node names, and `calicoctl ipam check` finding no problem at all.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import type { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { operatorType, runCli } from './helpers.js';
import {
  calicoctl,
  installReal328,
  ippoolsWide,
  tigeraCondition,
  waitOperator,
  waitPoolAndDatastoreReady,
  waitTigeraStatusAvailable,
  withRealCalico,
} from './calico-support.js';
import { ipamCheck } from './ipam-support.js';
import { CALICO_PROGRAMS_VERSION } from '../../src/dev/local-cluster/calico-programs.js';
import { stopAllPodChurns, type PodChurn } from './pod-churn.js';
import { expectPodsKept, podsThroughCni } from './restore-support.js';
import { waitNodeTunnels, type TunnelAddrs } from './tunnel-support.js';

const INSTALLATION = operatorType('installations', 'Installation');
const TIGERA_STATUS = operatorType('tigerastatuses', 'TigeraStatus');
const CALICO_CRD_GROUPS = ['crd.projectcalico.org', 'operator.tigera.io'];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const NODES = ['rop-node-1', 'rop-node-2'];
const run = Date.now().toString(36);
const PODS_NS = `rop-pods-${run}`;

let client: KubeClient;
let cluster: LocalCluster;
let dir: string;
/** The pods of the first test (through the CNI plugin): the allocations every later step must keep. */
let pods: PodChurn;
/** Each node's tunnel addresses, from calico-node's own allocator. */
let tunnels: TunnelAddrs[];

describe('restore --resources under the running real tigera operator v1.34.3 with the node side', () => {
  const real = withRealCalico('rop', { operators: ['v1.34.3'], calico: [CALICO_PROGRAMS_VERSION], nodeSide: ['v3.28.1'] });
  beforeAll(async () => {
    client = real.client();
    cluster = real.cluster;
    dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-restore-operator-'));
  }, 30 * 60_000);
  afterEach(() => stopAllPodChurns());
  // Runs before withRealCalico's own afterAll (hooks run in reverse): the pods go before the node side stops.
  afterAll(async () => {
    await stopAllPodChurns();
    await client?.delete(K.namespace, undefined, PODS_NS).catch(() => undefined);
  });

  it(
    'after every Calico CRD was deleted under the operator: the teardown finishes, Calico comes back as the operator reports it, IPAM intact',
    async () => {
      await installReal328(client, cluster);
      await waitPoolAndDatastoreReady(client);
      // A pool of the user's, parked: not listed in the Installation, so v1.34 leaves it as it is.
      const parked = { apiVersion: 'projectcalico.org/v3', kind: 'IPPool', metadata: { name: 'parked-pool' } };
      await calicoctl(
        ['create', '-f', '-'],
        JSON.stringify({ ...parked, spec: { cidr: '10.60.0.0/16', blockSize: 26, disabled: true, nodeSelector: 'all()' } }),
      );
      // calico-node's start on each node: a VXLAN tunnel address from default-ipv4-ippool (VXLANCrossSubnet).
      tunnels = await waitNodeTunnels(cluster, NODES);
      // Real allocations by the CNI plugin: blocks, handles, affinities on both nodes, one pod's address released.
      pods = await podsThroughCni(client, cluster, { nodes: NODES, namespace: PODS_NS, prefix: `rop${run}`, count: 6 });
      expect(pods.live().length).toBeGreaterThanOrEqual(4);
      // Every allocated address is in use (each pod has its Pod object): nothing for ipam check to report.
      const baseline = await ipamCheck();
      expect(baseline.problems, baseline.text).toBe(0);
      expect(baseline.nodeTunnelIps, baseline.text).toBe(NODES.length);
      const poolsBefore = await ippoolsWide();
      expect(poolsBefore['parked-pool']?.DISABLED).toBe('true');
      const reportsBefore = (await client.listAll(TIGERA_STATUS)).filter((t) => tigeraCondition(t, 'Available') === 'True').map((t) => t.metadata.name);
      expect(reportsBefore).toContain('calico');

      const bundle = path.join(dir, 'bundle');
      const e = await runCli(['export', '--out', bundle]);
      expect(e.code, e.stderr).toBe(0);

      // The incident: `kubectl delete -f tigera-operator.yaml` deletes every Calico CRD while the operator runs.
      for (const crd of (await client.listAll(K.crd)).filter((c) => CALICO_CRD_GROUPS.includes(c.spec.group)))
        await client.delete(K.crd, undefined, crd.metadata.name);
      await client.waitFor(
        'the pools to be gone',
        async () => ((await client.getOrUndefined(K.crd, undefined, 'ippools.crd.projectcalico.org')) ? undefined : true),
        {
          timeoutMs: 120_000,
        },
      );
      // The API server deletes a CRD's objects after the CRD: the Installation is then held by the operator's finalizers.
      const stuck = await client.waitFor(
        'the Installation to be deleting',
        async () => {
          const inst = await client.getOrUndefined(INSTALLATION, undefined, 'default');
          return inst?.metadata.deletionTimestamp ? inst : undefined;
        },
        { timeoutMs: 120_000 },
      );
      console.log(
        `Installation after the CRDs were deleted: finalizers ${stuck.metadata.finalizers?.join(', ')}, deleting since ${stuck.metadata.deletionTimestamp}`,
      );

      const started = Date.now();
      const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json'], { timeoutMs: 1_500_000 });
      const result = JSON.parse(r.stdout || '{}');
      console.log(
        `restore: exit ${r.code} in ${((Date.now() - started) / 1000).toFixed(1)} s; timings ${JSON.stringify(result.timings)}; counts ${JSON.stringify(result.counts)}; operator ${JSON.stringify(result.operator)}`,
      );
      expect(r.code, r.stderr.slice(-4000)).toBe(0);
      expect(r.stderr).toMatch(/being deleted: .*Installation default/);
      expect(result.ok).toBe(true);
      expect(result.operator.checked).toEqual(
        expect.arrayContaining(['TigeraStatus calico Available (reported after the operator resumed)', 'calico-node rendered']),
      );

      // Judged here again, from the operator's own objects: it runs, and its reports are newer than its restart.
      const st = await waitOperator(cluster, 'v1.34.3');
      const resumedAt = Date.parse(st.operator!.startedAt!);
      expect(resumedAt).toBeGreaterThan(started);
      for (const name of reportsBefore) {
        const ts = await waitTigeraStatusAvailable(client, name, 60_000);
        const available = ts.status.conditions.find((c: any) => c.type === 'Available');
        // Kubernetes times have whole seconds.
        expect(Date.parse(ts.metadata.creationTimestamp!), `TigeraStatus ${name} created after the operator resumed`).toBeGreaterThanOrEqual(resumedAt - 1000);
        expect(Date.parse(available.lastTransitionTime), `TigeraStatus ${name} Available since`).toBeGreaterThanOrEqual(resumedAt - 1000);
      }
      const inst = await client.get(INSTALLATION, undefined, 'default');
      expect(inst.metadata.deletionTimestamp).toBeUndefined();
      const node = await client.get(K.daemonSet, 'calico-system', 'calico-node');
      expect(node.spec.template.spec.containers.find((c: any) => c.name === 'calico-node').image).toMatch(/:v3\.28\.1$/);

      // The pools as in the bundle, and the parked one stays parked while the operator reconciles (it rewrites
      // the pools it owns within seconds: calico-9100.test.ts).
      for (let i = 0; i < 10; i++) {
        const pools = await ippoolsWide();
        expect(Object.keys(pools).sort()).toEqual(Object.keys(poolsBefore).sort());
        expect(pools['parked-pool']?.DISABLED, `parked-pool after ${i * 3} s`).toBe('true');
        expect(pools['default-ipv4-ippool']?.DISABLED).toBe('false');
        await sleep(3000);
      }
      // What restore left out of the bundle's IPAM because nothing uses it now (the teardown's pods, old tunnel addresses).
      console.log(
        `restore on IPAM: ${
          r.stderr
            .split('\n')
            .filter((l) => /not put back|put back without knowing/.test(l))
            .join(' | ') || 'nothing left out'
        }`,
      );
      // calico-node's allocator removes its node's tunnel address when it finds no pool of that encapsulation
      // (node/pkg/allocateip reconcileTunnelAddrs -> removeHostTunnelAddr), as it does while the IPPool kind is served
      // with no pool during the incident, and takes a new one once a pool exists: a node may come back with another
      // tunnel address. Restore must then not give its tunnel handle the old one too (each handle holding exactly the
      // address its Node names: expectPodsKept).
      const after = await waitNodeTunnels(cluster, NODES);
      console.log(`tunnel addresses before ${JSON.stringify(tunnels)}, after ${JSON.stringify(after)}`);
      tunnels = after;
      // Every pod holds its address again, by its handle alone; nothing released is held; ipam check finds nothing.
      await expectPodsKept(client, cluster, pods, tunnels);
    },
    40 * 60_000,
  );

  it(
    "refuses to write a bundle's Installation without ipPools while v1.34 manages a pool: the pool is not deleted",
    async () => {
      const managed = await client.get(POOL, undefined, 'default-ipv4-ippool');
      expect(managed.metadata.annotations?.['projectcalico.org/metadata'], 'the operator marked its pool').toMatch(/managed-by.*tigera-operator/);
      // A bundle whose Installation lists no pools, exported while the operator was stopped (so it could not act on it).
      await setOperatorReplicas(0);
      await client.waitFor('the operator to stop', async () => (cluster.calicoStatus()?.operator?.pid ? undefined : true), { timeoutMs: 120_000 });
      const inst = await client.get(INSTALLATION, undefined, 'default');
      const entries = inst.spec.calicoNetwork.ipPools;
      await client.mergePatch(INSTALLATION, undefined, 'default', { spec: { calicoNetwork: { ipPools: null } } });
      const bundle = path.join(dir, 'bundle-no-pools');
      const e = await runCli(['export', '--out', bundle]);
      expect(e.code, e.stderr).toBe(0);
      await client.mergePatch(INSTALLATION, undefined, 'default', { spec: { calicoNetwork: { ipPools: entries } } });
      await setOperatorReplicas(1);
      await waitOperator(cluster, 'v1.34.3');

      const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json'], { timeoutMs: 900_000 });
      expect(r.code, r.stderr.slice(-3000)).toBe(3);
      const actions = JSON.parse(r.stdout).actions;
      const written = actions.find((a: any) => a.id === 'Installation default');
      expect(written.action).toBe('refused');
      expect(written.reason).toMatch(/has no ipPools, which operator v1\.34\.3 defaults to \[\].*default-ipv4-ippool \(192\.168\.0\.0\/16\)/);
      expect(written.fix).toMatch(/kubectl label ippools\.projectcalico\.org default-ipv4-ippool app\.kubernetes\.io\/managed-by-/);
      expect((await client.get(INSTALLATION, undefined, 'default')).spec.calicoNetwork.ipPools).toEqual(entries);
      // Through the resumed operator's reconciles the pool stays (with ipPools [] it would delete it within seconds).
      await waitTigeraStatusAvailable(client, 'calico', 300_000);
      for (let i = 0; i < 5; i++) {
        expect((await ippoolsWide())['default-ipv4-ippool'], `default-ipv4-ippool after ${i * 3} s`).toBeDefined();
        await sleep(3000);
      }
      // The tunnel addresses the nodes hold after the first test's restore are kept.
      await expectPodsKept(client, cluster, pods, tunnels);
    },
    20 * 60_000,
  );
});

const POOL = { group: 'crd.projectcalico.org', version: 'v1', plural: 'ippools', kind: 'IPPool', namespaced: false };

async function setOperatorReplicas(replicas: number): Promise<void> {
  await client.mergePatch(K.deployment, 'tigera-operator', 'tigera-operator', { spec: { replicas } });
}
