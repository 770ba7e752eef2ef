/**
 * calico#9100 caused by a downgrade, avoided, with the real programs: Calico 3.30.7 under the real v1.38.13 operator
 * and the 3.30.7 API server, default-ipv4-ippool stopped the 3.29+ way (`disableNewAllocations: true` on its
 * Installation entry, which v1.38 writes as `disabled: true`) and new-ipv4-pool taking the allocations. 3.28's
 * Installation has no such field and its v1.34 operator rewrites a listed pool without `disabled`, so a plain
 * downgrade re-enables the pool. `doctor --target 3.28.1` names the trap, `plan --to 3.28.1` converts the stop to
 * 3.28's nodeSelector "!all()" (installation-pool-stop-allocations-converted), `apply` downgrades, and the real
 * v1.34.3 operator, behind the 3.28.1 API server, leaves the pool non-allocating. The plan needs no flag: the 3.30
 * fields 3.28's CRDs prune hold 3.30's own defaults (IPPool assignmentMode, FelixConfiguration nftablesMode), and
 * 3.30's empty ManagementClusterConnection CRD, which makes v1.34 take the cluster for Calico Enterprise (its
 * discovery.go RequiresTigeraSecure; the operator then exited every ~2 minutes), is deleted by apply-crds.
 * The pool is watched for 150 s from the v1.34.3 start (longer than the 2-minute cache-sync timeout after which the
 * Enterprise controllers made it exit) with a reconcile forced every 15 s and waited for in the operator's log
 * (not a 10-minute soak in CI, whose 90 minutes it would strain: calico-9100-plan.test.ts watches ten minutes there;
 * CNI_REWIND_E2E_SOAK_MS=600000 watches this one ten minutes too), while the operator process must stay the
 * same and real Pods come and go through Calico's node side (3.30.7's, then 3.28.1's after calico-node is rolled out:
 * start-up, tunnel allocator and CNI plugin per kwok node): every pod's address and each node's VXLAN tunnel address
 * come from new-ipv4-pool, no two pods share an address, each is allocated to its own handle, and
 * `calicoctl ipam check` finds no problem.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { applyManifests } from '../../src/kube/manifests.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { K } from '../../src/kube/builtin.js';
import { applyFixture, calicoType, fixtureObjects, operatorType } from './helpers.js';
import {
  applyLogged,
  expectChurnEndHeld,
  ippoolsWide,
  operatorLog,
  nonAllocating,
  waitApiServerTree,
  waitApiServiceAvailable,
  waitOperator,
  waitTigeraStatusAvailable,
  watchPoolNonAllocating,
  withRealCalicoChurn,
  doctorExportPlan,
  NEW_POOL_ENTRY,
  waitBothPools,
} from './calico-support.js';
import { until } from '../support/until.js';
import { expectNodeTunnelsKept, waitNodeTunnels, type TunnelAddrs } from './tunnel-support.js';

const POOL = calicoType('ippools', 'IPPool');
const INSTALLATION = operatorType('installations', 'Installation');
const TIGERA_STATUS = operatorType('tigerastatuses', 'TigeraStatus');
/** What the v1.38.13 operator's whisker and goldmane controllers add (tigera/operator v1.38.13 pkg/render/finalizers.go:33,41). */
const V138_FINALIZERS = ['operator.tigera.io/whisker-controller', 'operator.tigera.io/goldmane-controller'];
/** From the v1.34.3 start; CNI_REWIND_E2E_SOAK_MS lengthens it (docs/DEVELOPING.md). */
const WATCH_FROM_START_MS = Number(process.env.CNI_REWIND_E2E_SOAK_MS) || 150_000;
const TOUCH_MS = 15_000;
const MCC_CRD = 'managementclusterconnections.operator.tigera.io';
const NEW_POOL = /^10\.100\./;
let client: KubeClient;
let cluster: LocalCluster;

describe('3.30.7 with disableNewAllocations -> 3.28.1 with the real v1.38.13 and v1.34.3 operators', () => {
  const real = withRealCalicoChurn('c30', { operators: ['v1.38.13', 'v1.34.3'], calico: ['v3.30.7', 'v3.28.1'], nodeSide: ['v3.30.7', 'v3.28.1'] });
  beforeAll(() => {
    client = real.client();
    cluster = real.cluster;
  });

  it(
    'doctor and plan convert the stop to nodeSelector "!all()", and after apply the v1.34 operator leaves the pool non-allocating',
    async () => {
      // 3.30.7 installed as its docs say (operator-crds.yaml, tigera-operator.yaml, custom-resources.yaml), with the
      // user's pools in the Installation: the default one stopped, a new one allocating.
      await applyFixture(client, '3.30.7', 'operator-crds.yaml');
      await applyFixture(client, '3.30.7', 'tigera-operator.yaml');
      const crs = fixtureObjects('3.30.7', 'custom-resources.yaml');
      const pools = crs.find((o) => o.kind === 'Installation')!.spec.calicoNetwork.ipPools;
      pools[0].disableNewAllocations = true;
      pools.push(NEW_POOL_ENTRY);
      await applyManifests(client, crs, { fieldManager: 'cni-rewind-e2e' });
      await waitOperator(cluster, 'v1.38.13');
      await waitApiServerTree(cluster, client, 'v3.30.7');
      await waitApiServiceAvailable(client, 240_000);
      await waitBothPools(client, 'v1.38.13');
      await waitTigeraStatusAvailable(client, 'calico');
      // The supervisor writes its status after each tick, and with the node side a tick lasts until the node side's
      // work (start-up, ADDs) is done: kube-controllers can be running before the status says so.
      await until('kube-controllers of v3.30.7 in the supervisor status', () => cluster.calicoStatus()?.kubeControllers?.calico === 'v3.30.7', {
        timeoutMs: 120_000,
        intervalMs: 500,
        state: () => JSON.stringify(cluster.calicoStatus()?.kubeControllers),
      });
      // 3.30.7's calico-node start-up on each node, and its tunnel allocator's VXLAN address from the one pool
      // that allocates (default-ipv4-ippool is stopped).
      const tunnels: TunnelAddrs[] = await waitNodeTunnels(cluster, real.nodes);
      expect(tunnels.filter((t) => !NEW_POOL.test(t.vxlan) || t.ipip)).toEqual([]);
      // The 3.30 API server serves what v1.38 writes: assignmentMode is new in 3.30's v3 IPPool (3.28.1's drops it).
      const v3 = await client.request<any>('GET', '/apis/projectcalico.org/v3/ippools/default-ipv4-ippool');
      expect(v3.spec).toMatchObject({ cidr: '192.168.0.0/16', disabled: true, assignmentMode: 'Automatic' });
      expect((await ippoolsWide('v3.30.7'))['default-ipv4-ippool']?.DISABLED).toBe('true');

      // v1.38's whisker and goldmane controllers put their finalizers on the Installation and report in TigeraStatus
      // (3.30's custom-resources.yaml creates Whisker and Goldmane); the v1.34 operator knows neither (issue 30).
      await waitTigeraStatusAvailable(client, 'whisker');
      await waitTigeraStatusAvailable(client, 'goldmane');
      expect((await client.get(INSTALLATION, undefined, 'default')).metadata.finalizers).toEqual(expect.arrayContaining(V138_FINALIZERS));
      // v1.38 and 3.30's libcalico-go write 3.30-only fields with their defaults (IPPool assignmentMode: Automatic,
      // FelixConfiguration nftablesMode: Disabled): 3.28's CRDs prune them, which loses no setting, so the plan needs no flag.
      const { plan, planFile } = await doctorExportPlan(real.dir(), '3.28.1');
      console.log(`plan findings: ${plan.findings.map((f: any) => `${f.id} (${f.severity})`).join(', ')}`);
      const ids = plan.findings.map((f: any) => f.id);
      expect(ids).toContain('installation-pool-stop-allocations-converted');
      // 3.30.7's IPAM (the node side's tunnel allocator and CNI plugin) writes BlockAffinity type "host", its default.
      expect(ids).toEqual(expect.arrayContaining(['ippool-defaults-pruned', 'felixconfiguration-defaults-pruned', 'blockaffinity-defaults-pruned']));
      expect(plan.findings.find((f: any) => f.id === 'crd-changes-target-operator')).toMatchObject({
        title: expect.stringContaining(MCC_CRD),
        action: 'transform',
      });
      expect([...plan.transforms.installation.removeFinalizers].sort()).toEqual([...V138_FINALIZERS].sort());
      expect([...plan.transforms.installation.deleteTigeraStatuses].sort()).toEqual(['goldmane', 'whisker']);
      expect(plan.transforms.installation.stopAllocations).toEqual({ cidrs: ['192.168.0.0/16'], field: 'nodeSelector', value: '!all()' });

      const started = Date.now();
      const a = await applyLogged(planFile, 'apply');
      expect(a.code, a.stderr + a.stdout).toBe(0);
      const op = await waitOperator(cluster, 'v1.34.3');
      await waitApiServerTree(cluster, client, 'v3.28.1');
      expect(await client.getOrUndefined(K.crd, undefined, MCC_CRD)).toBeUndefined();
      const inst = await client.get(INSTALLATION, undefined, 'default');
      const entry = inst.spec.calicoNetwork.ipPools.find((e: any) => e.cidr === '192.168.0.0/16');
      expect(entry).toMatchObject({ nodeSelector: '!all()' });
      expect(entry.disableNewAllocations).toBeUndefined();
      // Nothing under v1.34 removes the 3.30 finalizers (a later delete of the Installation would hang on them).
      expect((inst.metadata.finalizers ?? []).filter((f) => V138_FINALIZERS.includes(f))).toEqual([]);
      for (const name of ['whisker', 'goldmane']) expect(await client.getOrUndefined(TIGERA_STATUS, undefined, name), name).toBeUndefined();

      // Real Pods come and go through the node side (3.28.1's once calico-node is rolled out) while the pool is
      // watched under the real target operator with forced reconciles.
      const churn = await real.startChurn();
      const opStart = Date.parse(op.operator!.startedAt!);
      const { seen, touches, reconciled } = await watchPoolNonAllocating(client, 'default-ipv4-ippool', {
        durationMs: opStart + WATCH_FROM_START_MS - Date.now(),
        touchEveryMs: TOUCH_MS,
        since: started,
        cluster,
      });
      await churn.stop();
      console.log(
        `default-ipv4-ippool until ${WATCH_FROM_START_MS / 1000} s after v1.34.3 started (${touches} touches, ${reconciled} reconciles seen): ${[...seen].map(([k, n]) => `${k} x${n}`).join(', ')}`,
      );
      expect(reconciled).toBeGreaterThanOrEqual(6);
      // The same v1.34.3 process throughout (checked every second above), and it did not start as an Enterprise operator.
      expect(cluster.calicoStatus()?.operator).toMatchObject({ tag: 'v1.34.3', pid: op.operator!.pid, starts: 1 });
      const tsee = operatorLog(cluster).filter((l) => l.includes('Checking if TSEE controllers are required'));
      expect(tsee.at(-1)).toContain('"required":false');
      expect(nonAllocating(await client.get(POOL, undefined, 'default-ipv4-ippool'))).toBe(true);
      const wide = await ippoolsWide();
      expect(wide['new-ipv4-pool']?.DISABLED).toBe('false');

      // Every pod of the churn settled, every refused ADD addressed afterwards, no address shared or held by no
      // running pod, `calicoctl ipam check` clean (the driver's pod-less exceptions are gone: every pod has a Pod);
      // every Calico address, the churn's and the operator's pods' (kube-controllers, the API server), from new-ipv4-pool.
      await expectChurnEndHeld(client, cluster, churn, { pool: NEW_POOL, operatorPodsFromPool: true });
      // The tunnel addresses 3.30.7's allocator claimed are kept by 3.28.1's after the rollout.
      await expectNodeTunnelsKept(client, tunnels);
    },
    40 * 60_000,
  );
});
