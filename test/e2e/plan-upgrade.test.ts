/** The other direction: a populated Calico 3.27.4 operator install upgraded in place to 3.28.1 with plan + apply. */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCK_NAME, LOCK_NAMESPACE } from '../../src/apply/lock.js';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { releasesDir } from '../support/releases.js';
import { canonicalJson } from '../../src/util/canonical.js';
import { deleteNodes, fixtureObjects, resetCalico, runCli, testClient } from './helpers.js';
import { calicoSnapshot, installCalicoExactly, INSTALLATION_327 } from './plan-support.js';
import { populateCalico } from './population.js';

describe('plan and apply: upgrade 3.27.4 -> 3.28.1 in place', () => {
  let client: KubeClient;
  let dir: string;

  beforeAll(async () => {
    client = await testClient();
    dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-upgrade-e2e-'));
    await resetCalico(client);
    await client.delete(K.lease, LOCK_NAMESPACE, LOCK_NAME);
    await deleteNodes(client, 'fup-');
    await createFakeNodes(client, [{ name: 'fup-1' }]);
    await installCalicoExactly(client, '3.27.4', INSTALLATION_327, 'quay.io/tigera/operator:v1.32.10');
    await populateCalico(client, { prefix: 'fup', nodes: ['fup-1'], customResources: '3.27.4' });
  });
  afterAll(async () => {
    await deleteNodes(client, 'fup-');
    client.close();
  });

  it('a disabled pool listed in the Installation (calico#9100): the plan stops it on its entry the 3.28 way instead of letting the operator re-enable it', async () => {
    const ippools = { group: 'crd.projectcalico.org', version: 'v1', plural: 'ippools', kind: 'IPPool', namespaced: false };
    // The incident's 3.27 state: default-ipv4-ippool (the Installation's entry) disabled after a pool migration.
    await client.apply(
      ippools,
      {
        apiVersion: 'crd.projectcalico.org/v1',
        kind: 'IPPool',
        metadata: { name: 'default-ipv4-ippool' },
        spec: { cidr: '192.168.0.0/16', blockSize: 26, ipipMode: 'Never', vxlanMode: 'CrossSubnet', natOutgoing: true, nodeSelector: 'all()', disabled: true },
      },
      { fieldManager: 'fup' },
    );
    try {
      const bundle = path.join(dir, 'bundle-9100');
      expect((await runCli(['export', '--out', bundle])).code).toBe(0);
      // doctor --target names the trap and its fix ...
      const d = await runCli(['doctor', '--target', '3.28.1', '-o', 'json']);
      expect(
        JSON.parse(d.stdout).findings.map((f: any) => f.id),
        d.stderr,
      ).toContain('pool-disabled-will-be-reenabled');
      // ... and the plan carries the fix out itself: a transform, shown, with the pool preflight passing on it.
      const p = await runCli(['plan', '--to', '3.28.1', '--bundle', bundle, '--no-disk-snapshots', '--out', path.join(dir, 'plan-9100.yaml'), '-o', 'json']);
      expect(p.code, p.stdout + p.stderr).toBe(0);
      const out = JSON.parse(p.stdout);
      expect(out.findings.find((f: any) => f.id === 'installation-disabled-pool-stop-allocations')).toMatchObject({
        action: 'transform',
        objects: ['IPPool/default-ipv4-ippool', 'Installation/default'],
      });
      expect(out.transforms.installation.stopAllocations).toEqual({ cidrs: ['192.168.0.0/16'], field: 'nodeSelector', value: '!all()' });
      expect(out.preflight.find((c: any) => c.name === 'target-operator-pools')).toMatchObject({ ok: true, blocking: true });
      const table = await runCli(['plan', '--to', '3.28.1', '--bundle', bundle, '--no-disk-snapshots']);
      expect(table.stdout + table.stderr).toMatch(/disabled IP pool\(s\) listed in the Installation: the v3\.28\.1 operator would re-enable them/);
    } finally {
      await client.delete(ippools, undefined, 'default-ipv4-ippool');
    }
  });

  it('finds nothing to transform, applies 3.28.1 CRDs and operator v1.34.3, and keeps every Calico object as it was', async () => {
    const before = await calicoSnapshot(client);
    const bundle = path.join(dir, 'bundle');
    expect((await runCli(['export', '--out', bundle])).code).toBe(0);
    const plan = path.join(dir, 'plan.yaml');
    const p = await runCli(['plan', '--to', '3.28.1', '--manifests', releasesDir(), '--bundle', bundle, '--no-disk-snapshots', '--out', plan, '-o', 'json']);
    expect(p.code, p.stderr).toBe(0);
    const out = JSON.parse(p.stdout);
    expect(out).toMatchObject({ direction: 'upgrade', current: { version: 'v3.27.4' }, target: { version: 'v3.28.1' } });
    expect(out.findings.filter((f: any) => f.action !== 'none' && f.action !== 'keep')).toEqual([]);
    expect(out.transforms.installation).toEqual({ removeFields: [], trimPoolsPerFamily: false });

    const r = await runCli(['apply', plan, '--yes', '-o', 'json']);
    expect(r.code, r.stderr + r.stdout).toBe(0);
    const after = await calicoSnapshot(client);
    expect(after.operator).toEqual({ image: 'quay.io/tigera/operator:v1.34.3', replicas: 1 });
    for (const crd of fixtureObjects('3.28.1', 'tigera-operator.yaml').filter((o) => o.kind === 'CustomResourceDefinition')) {
      expect(after.crds[crd.metadata.name], crd.metadata.name).toBe(canonicalJson(crd.spec.versions.map((v: any) => ({ name: v.name, schema: v.schema }))));
    }
    expect(after.data).toEqual(before.data);
  });
});
