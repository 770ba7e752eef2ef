/**
 * restore --resources across the operator's versions, with Calico's real programs (the tigera operators v1.34.3 and
 * v1.32.10, the Calico API server, kube-controllers; allocations by the IPAM driver):
 * - a disabled pool the real operator v1.34.3 manages was refused here; restore now stops its entry instead
 *   (restore-owned-stopped-pool.test.ts);
 * - a 3.28.1 bundle onto 3.27.4 CRDs (operator v1.32.10): the Installation fields 3.27 does not know are reported;
 *   --drop-unknown-fields writes it, the v1.32.10 operator reports Calico Available and re-renders its CNI config;
 * - an Installation backed up without v1.34's own finalizers (an older operator's bundle) restored under v1.34.3:
 *   the live ones are kept, so nothing changes and nothing drifts.
 * The driver's allocations have their Pod objects (restore puts back only allocations a running pod uses);
 * `calicoctl ipam check` finds no problem after each test.
 * The incident itself, --dry-run, owners, --existing and --prune are in restore.test.ts; the guards in
 * restore-guards.test.ts. This file shares their set-up (restore-support.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import { applyFixture, runCli } from './helpers.js';
import { clearCalicoFinalizers, waitOperator } from './calico-support.js';
import { expectDriverPodsIntact } from './driver-pods.js';
import { T, deleteCalicoCrds, exportTo, operatorReplicas, restoreSuite } from './restore-support.js';

describe('restore --resources across operator versions (the real v1.34.3 and v1.32.10)', () => {
  let client: KubeClient;
  // The driver's allocations get their Pod objects: restore puts back only allocations a running pod uses.
  const suite = restoreSuite('rsv', (c) => (client = c), { driverPods: true });
  const work = suite.work;
  afterEach(async () => {
    await expectDriverPodsIntact(client, suite.events());
  });

  it("an Installation backed up without v1.34's finalizers (as 3.27's operator kept it), restored under v1.34.3: unchanged, no drift (issue 30)", async () => {
    const V134 = ['operator.tigera.io/installation-controller', 'operator.tigera.io/apiserver-controller'];
    const finalizers = async () => (await client.get(T.installation, undefined, 'default')).metadata.finalizers ?? [];
    // Taken while the operator is scaled down, with the Installation's finalizers as v1.32 leaves them.
    await client.mergePatch(K.deployment, 'tigera-operator', 'tigera-operator', { spec: { replicas: 0 } });
    await client.waitFor('the operator to stop', async () => (suite.real.cluster.calicoStatus()?.operator?.pid ? undefined : true), { timeoutMs: 120_000 });
    const before = await finalizers();
    expect(before).toEqual(expect.arrayContaining(V134));
    await client.mergePatch(T.installation, undefined, 'default', { metadata: { finalizers: before.filter((f) => !V134.includes(f)) } });
    const bundle = await exportTo(work, 'v132-finalizers');
    await client.mergePatch(K.deployment, 'tigera-operator', 'tigera-operator', { spec: { replicas: 1 } });
    await waitOperator(suite.real.cluster, 'v1.34.3');
    await client.waitFor(
      'v1.34.3 to put its finalizers back',
      async () => {
        const live = await finalizers();
        return V134.every((f) => live.includes(f)) ? true : undefined;
      },
      { timeoutMs: 120_000, state: async () => `finalizers ${JSON.stringify(await finalizers())}` },
    );

    const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json'], { timeoutMs: 1_500_000 });
    const result = JSON.parse(r.stdout);
    expect(result.actions.find((a: any) => a.id === 'Installation default')?.action).toBe('unchanged');
    expect(result.drifted, r.stderr).toEqual([]);
    expect(r.code, r.stderr).toBe(0);
    expect(await finalizers()).toEqual(expect.arrayContaining(V134));
  });

  it('a 3.28.1 bundle onto 3.27.4 CRDs: reports the Installation fields 3.27 does not know; --drop-unknown-fields writes it, and v1.32.10 reports Calico', async () => {
    const bundle = await exportTo(work, 'v3281');
    // Downgrade the CRDs the incident way (delete), then install 3.27.4's operator manifests. The Installation stays
    // Terminating on v1.34's finalizers, which v1.32 does not remove: cleared by hand, as the runbook says, so the
    // old CRDs go and 3.27.4's can be created.
    await deleteCalicoCrds(client);
    await clearCalicoFinalizers(client);
    await client.waitFor(
      'every Calico CRD to be gone',
      async () => ((await client.listAll(K.crd)).some((x) => ['crd.projectcalico.org', 'operator.tigera.io'].includes(x.spec.group)) ? undefined : true),
      { timeoutMs: 120_000 },
    );
    await applyFixture(client, '3.27.4', 'tigera-operator.yaml');
    await waitOperator(suite.real.cluster, 'v1.32.10');
    const replicas = await operatorReplicas(client);

    const dry = await runCli(['restore', bundle, '--resources', '--dry-run', '-o', 'json']);
    expect(dry.code, dry.stderr).toBe(1);
    const plan = JSON.parse(dry.stdout);
    const inst = plan.actions.find((a: any) => a.id === 'Installation default');
    expect(inst.action).toBe('blocked');
    expect(inst.findings.map((f: any) => `${f.kind} ${f.path}`).sort()).toEqual([
      'pruned spec.calicoNetwork.ipPools[0].allowedUses',
      'pruned spec.calicoNetwork.ipPools[0].name',
      // Defaulted into the spec by the real v1.34.3 operator.
      'pruned spec.calicoNetwork.linuxPolicySetupTimeoutSeconds',
    ]);
    expect(inst.fix).toMatch(/--drop-unknown-fields/);
    // Operator v1.32 does not manage pools: the disabled pool is written as it is, nothing refused.
    expect(plan.actions.filter((a: any) => a.action === 'refused')).toEqual([]);

    const blocked = await runCli(['restore', bundle, '--resources', '--yes']);
    expect(blocked.code).toBe(3);
    expect(blocked.stdout).toMatch(/Installation default\s+blocked\s+.*does not know .*spec\.calicoNetwork\.ipPools\[0\]\.name/);
    expect(await client.getOrUndefined(T.installation, undefined, 'default')).toBeUndefined();

    const started = Date.now();
    const r = await runCli(['restore', bundle, '--resources', '--yes', '--drop-unknown-fields', '-o', 'json'], { timeoutMs: 1_500_000 });
    console.log(`restore onto 3.27.4: exit ${r.code} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    // Everything written; exit 3 only for the real v1.32.10 operator rendering its own (3.27.4) CNI config over the
    // bundle's 3.28.1 one once it runs again: the read-back reports that as drift.
    expect(r.code, r.stderr).toBe(3);
    const result = JSON.parse(r.stdout);
    expect(result.failures).toEqual([]);
    expect(result.drifted).toEqual([{ id: 'ConfigMap calico-system/cni-config', paths: ['data.config'] }]);
    // Judged by what v1.32.10 reports: it runs no IP pool controller, so the bundle's "ippools" report is not awaited.
    expect(result.operator.checked).toContain('TigeraStatus calico Available (reported after the operator resumed)');
    const live = await client.get(T.installation, undefined, 'default');
    expect(live.spec.calicoNetwork.ipPools[0]).toMatchObject({ cidr: '192.168.0.0/16', encapsulation: 'VXLANCrossSubnet' });
    expect(live.spec.calicoNetwork.ipPools[0].name).toBeUndefined();
    expect((await client.get(T.ippool, undefined, 'legacy-pool')).spec.disabled).toBe(true);
    expect(await operatorReplicas(client)).toBe(replicas);
  }, 600_000);
});
