/**
 * plan + apply against the real control plane: a Calico 3.28.1 operator install with a realistic population,
 * downgraded to 3.27.4 in place, interrupted (SIGKILL) at every step boundary and resumed, guarded by the lock,
 * and refused when the bundle fails verify. The operator itself does not run here (kwok makes its pod Ready).
 */
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Journal, journalPathFor } from '../../src/apply/journal.js';
import { LOCK_NAME, LOCK_NAMESPACE } from '../../src/apply/lock.js';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { crdResourceType } from '../../src/kube/discovery.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { releasesDir } from '../support/releases.js';
import { deleteNodes, fixtureObjects, resetCalico, runCli, testClient } from './helpers.js';
import { applyKilledAtEachStep, calicoSnapshot, expectDowngradedTo327, installCalico328 } from './plan-support.js';
import { populateCalico, type Population } from './population.js';

const fixtures = releasesDir();

describe('plan and apply: 3.28.1 -> 3.27.4 on a real cluster', () => {
  let client: KubeClient;
  let dir: string;
  let population: Population;
  let uninterrupted: Awaited<ReturnType<typeof calicoSnapshot>>;

  /** A fresh bundle and plan for the current state (3.28.1 installed). */
  async function exportAndPlan(name: string, extra: string[] = []): Promise<{ bundle: string; plan: string; out: any }> {
    const bundle = path.join(dir, `bundle-${name}`);
    const e = await runCli(['export', '--out', bundle]);
    expect(e.code, e.stderr).toBe(0);
    const plan = path.join(dir, `plan-${name}.yaml`);
    const p = await runCli([
      'plan',
      '--to',
      '3.27.4',
      '--manifests',
      fixtures,
      '--bundle',
      bundle,
      '--no-disk-snapshots',
      '--out',
      plan,
      '-o',
      'json',
      ...extra,
    ]);
    expect(p.code, p.stderr).toBe(0);
    return { bundle, plan, out: JSON.parse(p.stdout) };
  }

  beforeAll(async () => {
    client = await testClient();
    dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-plan-e2e-'));
    await resetCalico(client);
    await client.delete(K.lease, LOCK_NAMESPACE, LOCK_NAME);
    await deleteNodes(client, 'fpa-');
    await createFakeNodes(client, [{ name: 'fpa-1' }, { name: 'fpa-2' }]);
    await installCalico328(client);
    population = await populateCalico(client, { prefix: 'fpa', nodes: ['fpa-1', 'fpa-2'] });
    await installCalico328(client); // the Installation as the 3.28 operator leaves it (name + allowedUses on its pool)
  });
  afterAll(async () => {
    await deleteNodes(client, 'fpa-');
    client.close();
  });

  it('plan --to 3.27.4 reports the Installation fields 3.27 lacks, with what it will do, and changes nothing', async () => {
    const before = await calicoSnapshot(client);
    const { out, bundle } = await exportAndPlan('plan-only');
    expect(out.current).toMatchObject({ installType: 'operator', version: 'v3.28.1' });
    expect(out.target).toMatchObject({ version: 'v3.27.4', operatorImage: 'quay.io/tigera/operator:v1.32.10' });
    expect(out.direction).toBe('downgrade');
    const f = out.findings.find((x: any) => x.id === 'installation-fields-unknown-to-target');
    expect(f.action).toBe('transform');
    expect(f.objects).toEqual(['Installation/default']);
    expect(f.details.join('\n')).toMatch(/spec\.calicoNetwork\.ipPools\[0\]\.name/);
    expect(f.details.join('\n')).toMatch(/spec\.calicoNetwork\.ipPools\[0\]\.allowedUses/);
    expect(out.bundle.path).toBe(path.resolve(bundle));
    expect(out.bundle.manifestSha256).toMatch(/^[0-9a-f]{64}$/);
    expect(out.steps.map((s: any) => s.id)).toEqual([
      'preflight',
      'pause-operator',
      'apply-crds',
      'apply-operator',
      'transform-installation',
      'resume-operator',
      'wait-rollout',
      'verify-data',
    ]);
    const human = await runCli(['plan', '--to', '3.27.4', '--manifests', fixtures, '--bundle', bundle, '--no-disk-snapshots']);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toContain('ipPools[0].allowedUses (unknown to v3.27.4)');
    expect(human.stdout).toMatch(/plan \(transform\): remove these fields/);
    // Without --no-disk-snapshots the export-only bundle is refused (exit 5) and says why.
    const strict = await runCli(['plan', '--to', '3.27.4', '--manifests', fixtures, '--bundle', bundle]);
    expect(strict.code).toBe(5);
    expect(strict.stderr).toMatch(/disk-snapshots: no completed disk snapshot/);
    expect(await calicoSnapshot(client)).toEqual(before);
  });

  it('apply --yes ends with the 3.27.4 CRDs, operator v1.32.10, every pool/IPAM object/policy unchanged and a valid Installation', async () => {
    const before = await calicoSnapshot(client);
    const { plan, bundle } = await exportAndPlan('inplace');
    const r = await runCli(['apply', plan, '--yes', '-o', 'json']);
    expect(r.code, r.stderr + r.stdout).toBe(0);
    const res = JSON.parse(r.stdout);
    expect(res.ok).toBe(true);
    expect(res.steps.every((s: any) => s.status === 'done')).toBe(true);
    console.log('apply steps:', res.steps.map((s: any) => `${s.id} ${(s.ms / 1000).toFixed(1)}s`).join(', '));

    // Exactly the 3.27.4 CRDs (none merged with 3.28's, none deleted), operator v1.32.10, every population object
    // unchanged, an Installation valid for 3.27 (no pool name, strict validation passes), the lock given back.
    const after = await expectDowngradedTo327(client, population, before);
    const instCrd = fixtureObjects('3.27.4', 'tigera-operator.yaml').find((o) => o.metadata.name === 'installations.operator.tigera.io')!;
    const inst = await client.get(crdResourceType(instCrd), undefined, 'default');
    expect(inst.spec.calicoNetwork.ipPools[0]).toMatchObject({ cidr: '192.168.0.0/16', blockSize: 26, encapsulation: 'VXLANCrossSubnet' });
    expect(inst.spec.calicoNetwork.ipPools[0].name).toBeUndefined();

    // The journal next to the bundle records each step's start and end.
    const j = Journal.read(journalPathFor(bundle, res.planId));
    expect(j.done).toBe(true);
    expect(j.remembered.operatorReplicas).toBe(1);
    uninterrupted = after;

    // Applying the same plan again is refused (already started); --resume of a finished plan does nothing.
    const again = await runCli(['apply', plan, '--yes']);
    expect(again.code).toBe(5);
    expect(again.stderr).toMatch(/already started/);
  });

  it('SIGKILL after each step in turn, then --resume: the end state equals the uninterrupted run', async () => {
    expect(uninterrupted, 'needs the uninterrupted run above').toBeDefined();
    await installCalico328(client);
    const { plan, bundle, out } = await exportAndPlan('killed');
    await applyKilledAtEachStep(plan, bundle, out, async (k, st) => {
      if (k === 2) {
        // The operator is paused now; the replica count to go back to is in the journal, not in the Deployment.
        expect((await client.get(K.deployment, 'tigera-operator', 'tigera-operator')).spec.replicas).toBe(0);
        expect(st.remembered.operatorReplicas).toBe(1);
      }
    });
    expect(await calicoSnapshot(client)).toEqual(uninterrupted);
  });

  it('a second concurrent apply is refused by the lock; a stale lock is reported and can be broken', async () => {
    await installCalico328(client);
    const a = await exportAndPlan('lock-a');
    const b = await exportAndPlan('lock-b');
    const first = runCli(['apply', a.plan, '--yes']);
    await client.waitFor(
      'the first apply to hold the lock',
      async () => ((await client.getOrUndefined(K.lease, LOCK_NAMESPACE, LOCK_NAME))?.spec?.holderIdentity?.includes(a.out.id) ? true : undefined),
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    const second = await runCli(['apply', b.plan, '--yes']);
    expect(second.code).toBe(5);
    expect(second.stderr).toMatch(/another apply is running against this cluster: lock held by .*\/\d+\/plan-/);
    expect(second.stderr).toMatch(/held for \d+s/);
    const r1 = await first;
    expect(r1.code, r1.stderr).toBe(0);

    // A lock left by a process that is gone: reported as stale with holder and age, taken with --break-lock.
    await installCalico328(client);
    const c = await exportAndPlan('lock-c');
    const lease = await client.get(K.lease, LOCK_NAMESPACE, LOCK_NAME);
    const then = new Date(Date.now() - 5 * 60_000)
      .toISOString()
      .replace('Z', '000Z')
      .replace(/\.(\d{3})000Z$/, '.$1000Z');
    await client.replace(K.lease, {
      ...lease,
      spec: { holderIdentity: `${os.hostname()}/999999/plan-gone`, leaseDurationSeconds: 60, acquireTime: then, renewTime: then },
    });
    const refused = await runCli(['apply', c.plan, '--yes']);
    expect(refused.code).toBe(5);
    expect(refused.stderr).toMatch(/stale apply lock is held by .*\/999999\/plan-gone, held for 3\d\ds/);
    expect(refused.stderr).toMatch(/--break-lock/);
    const broken = await runCli(['apply', c.plan, '--yes', '--break-lock']);
    expect(broken.code, broken.stderr).toBe(0);
    expect(broken.stderr).toMatch(/took over the apply lock from .*plan-gone/);
  });

  it('refuses (exit 5) a plan whose bundle fails verify, before changing anything', async () => {
    await installCalico328(client);
    const { plan, bundle } = await exportAndPlan('tampered');
    const pools = path.join(bundle, 'resources', 'crd.projectcalico.org', 'IPPool', '_cluster');
    const f = path.join(pools, readdirSync(pools)[0]!);
    writeFileSync(f, readFileSync(f, 'utf8').replace(/cidr: .*/, 'cidr: 10.99.0.0/16'));
    const before = await calicoSnapshot(client);
    const r = await runCli(['apply', plan, '--yes']);
    expect(r.code).toBe(5);
    expect(r.stderr).toMatch(/fails verify/);
    expect(await calicoSnapshot(client)).toEqual(before);
    const bad = await runCli(['apply', path.join(dir, 'nope.yaml'), '--yes']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/no such plan file/);
  });
});
