/**
 * `restore --resources` under a running real tigera operator (v1.34.3, Calico 3.28.1), judged by what the operator
 * did: Calico installed through the operator, a user pool parked (disabled, not the operator's), real allocations
 * made by the IPAM driver (libcalico-go's IPAM client), an export, then the incident: every Calico CRD deleted while
 * the operator runs, which leaves the Installation Terminating on the operator's finalizers while it tears Calico
 * down. The restore must let that teardown finish and then bring Calico back: the resumed operator's own TigeraStatus
 * reports (written after it restarted, not the stale ones) Available, the Installation not Terminating, calico-node
 * rendered, the pools as in the bundle (the parked one stays disabled through the operator's reconciles), every
 * allocation held before still held, and `calicoctl ipam check` finding no problem at all. The driver's allocations
 * get their Pod objects (podsForDriverAllocations): restore puts back only allocations a running pod uses.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
import { heldByLog, ipamCheck, readEvents, startChurn } from './ipam-support.js';
import { DRIVER_NS, expectDriverPodsIntact, podsForDriverAllocations } from './driver-pods.js';
import { CALICO_PROGRAMS_VERSION, ensureCalicoProgram } from '../../src/dev/local-cluster/calico-programs.js';

const INSTALLATION = operatorType('installations', 'Installation');
const TIGERA_STATUS = operatorType('tigerastatuses', 'TigeraStatus');
const CALICO_CRD_GROUPS = ['crd.projectcalico.org', 'operator.tigera.io'];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let client: KubeClient;
let cluster: LocalCluster;
let dir: string;
/** The IPAM driver's events of the first test: the allocations every later step must keep. */
let evs: ReturnType<typeof readEvents>;

describe('restore --resources under the running real tigera operator v1.34.3', () => {
  const real = withRealCalico('rop');
  beforeAll(async () => {
    client = real.client();
    cluster = real.cluster;
    dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-restore-operator-'));
    await ensureCalicoProgram('ipam-driver', CALICO_PROGRAMS_VERSION);
  }, 30 * 60_000);
  afterAll(async () => {
    await client?.delete(K.namespace, undefined, DRIVER_NS).catch(() => undefined);
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
      // Real allocations, as the CNI plugin makes them: blocks, handles, affinities on both nodes.
      const log = path.join(dir, 'driver.jsonl');
      const churn = await startChurn(log, { nodes: ['rop-node-1', 'rop-node-2'], prefix: `rop${Date.now().toString(36)}`, rate: 8, target: 8, durationS: 6 });
      expect(await churn.done).toBe(0);
      evs = readEvents(log);
      const held = heldByLog(evs);
      expect(held.size).toBeGreaterThanOrEqual(4);
      // Their Pod objects, running with those addresses: restore puts back only allocations a running pod uses.
      await podsForDriverAllocations(client, evs, DRIVER_NS);
      // Every allocated address is in use now: no leak, nothing else wrong in IPAM (the operator's kwok pods have
      // kwok's addresses, outside every pool, which ipam check counts apart).
      const baseline = await ipamCheck();
      const { leaked, noAllocation, handlesWithoutIps, missingHandles } = baseline;
      expect({ leaked, noAllocation, handlesWithoutIps, missingHandles }, baseline.text).toEqual({
        leaked: 0,
        noAllocation: 0,
        handlesWithoutIps: 0,
        missingHandles: 0,
      });
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
      // Every allocation held before is held again, by its handle alone; ipam check finds no problem.
      await expectDriverPodsIntact(client, evs);
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
      await expectDriverPodsIntact(client, evs);
    },
    20 * 60_000,
  );
});

const POOL = { group: 'crd.projectcalico.org', version: 'v1', plural: 'ippools', kind: 'IPPool', namespaced: false };

async function setOperatorReplicas(replicas: number): Promise<void> {
  await client.mergePatch(K.deployment, 'tigera-operator', 'tigera-operator', { spec: { replicas } });
}
