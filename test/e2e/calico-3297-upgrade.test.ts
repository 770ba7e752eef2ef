/**
 * 3.28.1 -> 3.29.7 with the real v1.34.3 and v1.36.16 operators, a disabled pool listed in the Installation.
 * Under a running v1.34 with the Calico API server a listed, disabled pool is re-enabled at once (calico#9100), so
 * the one 3.28 cluster where such a pool stays disabled is one without the API server: v1.34 then only reports
 * "Unable to modify IP pools while Calico API server is unavailable" (pool_controller.go). Here default-ipv4-ippool
 * is created and labelled by v1.34 and then disabled with calicoctl. `doctor --target 3.29.7` names the trap,
 * `plan --to 3.29.7` sets `disableNewAllocations: true` on its entry (v1.36 converts the pool's `disabled` to that
 * field and compares it), `apply` upgrades, and once the user adds the API server v1.36 writes the pools through
 * projectcalico.org/v3: the pool stays disabled through three minutes of forced reconciles while real Pods come and
 * go through Calico's node side (3.28.1's, then 3.29.7's after calico-node is rolled out: start-up, tunnel allocator
 * and CNI plugin per kwok node), every one of them addressed from new-ipv4-pool and held by its own handle. With the managed-by label removed, v1.36 adopts the pool again by its own equality (the converted
 * entry equals the disabled pool), as the tool's model of it (adoptionReason) says.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { adoptionReason } from '../../src/doctor/checks/pools.js';
import { isOperatorLabelled } from '../../src/calico/knowledge.js';
import { applyManifests } from '../../src/kube/manifests.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { applyFixture, calicoType, fixtureObjects, operatorType } from './helpers.js';
import {
  applyLogged,
  calicoctl,
  expectChurnEndHeld,
  kubectl,
  NEW_POOL_ENTRY,
  doctorExportPlan,
  nonAllocating,
  waitBothPools,
  tigeraCondition,
  waitApiServerTree,
  waitApiServiceAvailable,
  waitOperator,
  waitTigeraStatusAvailable,
  watchPoolNonAllocating,
  withRealCalicoChurn,
} from './calico-support.js';
import { expectNodeTunnelsKept, waitNodeTunnels } from './tunnel-support.js';

const POOL = calicoType('ippools', 'IPPool');
const INSTALLATION = operatorType('installations', 'Installation');
const TIGERA_STATUS = operatorType('tigerastatuses', 'TigeraStatus');
const MANAGED_BY = 'app.kubernetes.io/managed-by';
const WATCH_MS = 3 * 60_000;
const TOUCH_MS = 20_000;
const NEW_POOL = /^10\.100\./;
let client: KubeClient;
let cluster: LocalCluster;

const touch = (n: string) => client.mergePatch(INSTALLATION, undefined, 'default', { metadata: { annotations: { 'cni-rewind.test/touch': n } } });

describe('3.28.1 -> 3.29.7 with a disabled listed pool and the real v1.34.3 and v1.36.16 operators', () => {
  const real = withRealCalicoChurn('c29', { operators: ['v1.34.3', 'v1.36.16'], calico: ['v3.28.1', 'v3.29.7'], nodeSide: ['v3.28.1', 'v3.29.7'] });
  beforeAll(() => {
    client = real.client();
    cluster = real.cluster;
  });

  it(
    'plan sets disableNewAllocations on the entry, and v1.36 keeps the pool disabled and adopts it by equality',
    async () => {
      // 3.28.1 as its docs install it, without the APIServer resource, with a second pool in the Installation.
      await applyFixture(client, '3.28.1', 'tigera-operator.yaml');
      const crs = fixtureObjects('3.28.1', 'custom-resources.yaml').filter((o) => o.kind !== 'APIServer');
      crs.find((o) => o.kind === 'Installation')!.spec.calicoNetwork.ipPools.push(NEW_POOL_ENTRY);
      await applyManifests(client, crs, { fieldManager: 'cni-rewind-e2e' });
      await waitOperator(cluster, 'v1.34.3');
      await waitBothPools(client, 'v1.34.3');
      await waitTigeraStatusAvailable(client, 'calico');
      expect(isOperatorLabelled(await client.get(POOL, undefined, 'default-ipv4-ippool'))).toBe(true);

      // The user stops the default pool the pre-3.28 way. Without the API server v1.34 cannot rewrite it.
      await calicoctl(['patch', 'ippool', 'default-ipv4-ippool', '-p', '{"spec":{"disabled":true}}']);
      await touch('0');
      await client.waitFor(
        'v1.34.3 to report that it cannot modify the pool without the API server',
        async () => {
          const ts = await client.getOrUndefined(TIGERA_STATUS, undefined, 'ippools');
          const degraded = ts?.status?.conditions?.find((c: any) => c.type === 'Degraded');
          return degraded?.status === 'True' && /API server is unavailable/.test(degraded.message ?? '') ? true : undefined;
        },
        { timeoutMs: 120_000, intervalMs: 1000 },
      );
      expect((await client.get(POOL, undefined, 'default-ipv4-ippool')).spec.disabled).toBe(true);

      const { plan, planFile } = await doctorExportPlan(real.dir(), '3.29.7', 'disableNewAllocations: true');
      console.log(`plan findings: ${plan.findings.map((f: any) => `${f.id} (${f.severity})`).join(', ')}`);
      expect(plan.findings.map((f: any) => f.id)).toContain('installation-disabled-pool-stop-allocations');
      expect(plan.transforms.installation.stopAllocations).toEqual({ cidrs: ['192.168.0.0/16'], field: 'disableNewAllocations', value: true });

      const started = Date.now();
      const a = await applyLogged(planFile, 'apply');
      expect(a.code, a.stderr + a.stdout).toBe(0);
      const st = await waitOperator(cluster, 'v1.36.16');
      const operatorStarted = Date.parse(st.operator!.startedAt!);
      // TigeraStatus calico as the v1.36 operator wrote it (resume-operator deleted the old one).
      const calicoStatus = await client.get(TIGERA_STATUS, undefined, 'calico');
      expect(Date.parse(calicoStatus.metadata.creationTimestamp!)).toBeGreaterThanOrEqual(Math.floor(operatorStarted / 1000) * 1000);
      expect(tigeraCondition(calicoStatus, 'Available')).toBe('True');
      // v1.36 defaults the field on the other entry (fillDefaults) and keeps the planned stop.
      const entries = (await client.get(INSTALLATION, undefined, 'default')).spec.calicoNetwork.ipPools;
      expect(entries.find((e: any) => e.cidr === '192.168.0.0/16')).toMatchObject({ disableNewAllocations: true, nodeSelector: 'all()' });
      await client.waitFor(
        'v1.36.16 to default disableNewAllocations on new-ipv4-pool',
        async () =>
          (await client.get(INSTALLATION, undefined, 'default')).spec.calicoNetwork.ipPools.find((e: any) => e.cidr === '10.100.0.0/16')
            ?.disableNewAllocations === false
            ? true
            : undefined,
        { timeoutMs: 60_000, intervalMs: 500 },
      );

      // The user adds the API server (3.29.7's custom-resources.yaml): from then on v1.36 writes the pools through v3.
      await applyManifests(
        client,
        fixtureObjects('3.29.7', 'custom-resources.yaml').filter((o) => o.kind === 'APIServer'),
        { fieldManager: 'cni-rewind-e2e' },
      );
      await waitApiServerTree(cluster, client, 'v3.29.7');
      await waitApiServiceAvailable(client, 240_000);
      await client.waitFor(
        'APIServer default Ready (v1.36 writes pools through v3 from then on)',
        async () =>
          (await client.getOrUndefined(operatorType('apiservers', 'APIServer'), undefined, 'default'))?.status?.state === 'Ready' ? true : undefined,
        { timeoutMs: 240_000, intervalMs: 1000 },
      );
      const v3 = await client.request<any>('GET', '/apis/projectcalico.org/v3/ippools/default-ipv4-ippool');
      expect(v3.spec.disabled).toBe(true);

      // 3.29.7's calico-node on each node (rolled out by v1.36) with its VXLAN tunnel address; then real Pods come and
      // go through the CNI plugin, one create or delete every 1.5 s (the node side runs one CNI call at a time).
      const tunnels = await waitNodeTunnels(cluster, real.nodes);
      const churn = await real.startChurn();
      const { seen, touches } = await watchPoolNonAllocating(client, 'default-ipv4-ippool', { durationMs: WATCH_MS, touchEveryMs: TOUCH_MS, since: started });
      console.log(`default-ipv4-ippool over ${WATCH_MS / 60_000} min (${touches} forced reconciles): ${[...seen].map(([k, n]) => `${k} x${n}`).join(', ')}`);
      expect(touches).toBeGreaterThanOrEqual(8);

      // Adoption by equality: without its label the pool is v1.36's only if the converted entry equals it, which is
      // what the tool's model predicts; v1.36 then writes the label back (through v3) and keeps the pool disabled.
      const unlabelled = await client.get(POOL, undefined, 'default-ipv4-ippool');
      const inst = await client.get(INSTALLATION, undefined, 'default');
      const withoutLabel = { ...unlabelled, metadata: { ...unlabelled.metadata, labels: {}, annotations: {} } };
      expect(adoptionReason(withoutLabel, inst.spec.calicoNetwork.ipPools, 'v3.29.7', inst.spec.cni?.type)).toMatch(/equals entry/);
      const relabelled = JSON.parse(await kubectl(cluster, ['label', 'ippools.projectcalico.org', 'default-ipv4-ippool', `${MANAGED_BY}-`, '-o', 'json']));
      expect(relabelled.metadata.labels?.[MANAGED_BY]).toBeUndefined();
      const unlabelledAt = Date.now();
      await touch('readopt');
      await client.waitFor(
        'v1.36.16 to adopt default-ipv4-ippool again by equality (its label written back)',
        async () => {
          const pool = await client.get(POOL, undefined, 'default-ipv4-ippool');
          if (!nonAllocating(pool)) throw new Error(`default-ipv4-ippool allocating again: ${JSON.stringify(pool.spec)}`);
          return isOperatorLabelled(pool) ? true : undefined;
        },
        { timeoutMs: 120_000, intervalMs: 500 },
      );
      console.log(`label written back ${((Date.now() - unlabelledAt) / 1000).toFixed(1)} s after its removal`);
      await churn.stop();
      expect((await client.get(POOL, undefined, 'default-ipv4-ippool')).spec.disabled).toBe(true);
      await waitTigeraStatusAvailable(client, 'ippools', 60_000);

      // Every pod of the churn settled and addressed from new-ipv4-pool, held by its own handle, nothing released
      // still held, `calicoctl ipam check` clean (the driver's pod-less exceptions are gone: every pod has a Pod); the
      // churn's pods and the operator's (kube-controllers, the API server) all judged, no address shared or free. The
      // operator's pods of the 3.28.1 era may hold addresses of default-ipv4-ippool (enabled then).
      await expectChurnEndHeld(client, cluster, churn, { pool: NEW_POOL, operatorPodsFromPool: false });
      await expectNodeTunnelsKept(client, tunnels);
    },
    40 * 60_000,
  );
});
