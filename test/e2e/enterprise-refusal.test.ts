/**
 * Calico Enterprise told apart by its Installation (spec.variant TigeraSecureEnterprise, the operator's own
 * ProductVariant, validated by the real Installation CRD of the v1.34.3 operator): `status` names it, `plan` is
 * refused by name (exit 5) before the bundle is read, `export` still works (its data is in the same CRDs).
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { applyManifests, waitCrdsEstablished } from '../../src/kube/manifests.js';
import { fixtureObjects, resetCalico, runCli, testClient } from './helpers.js';

const INSTALLATION = { group: 'operator.tigera.io', version: 'v1', plural: 'installations', kind: 'Installation', namespaced: false };

describe('Calico Enterprise (Installation variant TigeraSecureEnterprise)', () => {
  let client: KubeClient;
  let dir: string;

  beforeAll(async () => {
    client = await testClient();
    dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-enterprise-e2e-'));
    await resetCalico(client);
    // The CRDs of Calico 3.28.1's tigera-operator.yaml (operator.tigera.io and crd.projectcalico.org), no operator.
    const crds = fixtureObjects('3.28.1', 'tigera-operator.yaml').filter((o) => o.kind === 'CustomResourceDefinition');
    await applyManifests(client, crds, { fieldManager: 'cni-rewind-e2e' });
    await waitCrdsEstablished(
      client,
      crds.map((c) => c.metadata.name),
    );
    await client.create(INSTALLATION, {
      apiVersion: 'operator.tigera.io/v1',
      kind: 'Installation',
      metadata: { name: 'default' },
      spec: { variant: 'TigeraSecureEnterprise' },
    });
  }, 300_000);

  afterAll(async () => {
    await resetCalico(client);
    client.close();
  }, 300_000);

  it('status names the variant; plan is refused with exit 5 and Tigera’s procedure, writing nothing', async () => {
    const s = await runCli(['status', '-o', 'json']);
    expect(s.code, s.stderr).toBe(0);
    expect(JSON.parse(s.stdout).calico.method.variant).toBe('TigeraSecureEnterprise');
    const plan = await runCli(['plan', '--to', '3.29.7', '--no-disk-snapshots', '--out', path.join(dir, 'plan.yaml')]);
    expect(plan.code, plan.stderr).toBe(5);
    expect(plan.stderr).toContain('this cluster runs Calico Enterprise (Installation variant TigeraSecureEnterprise)');
    expect(plan.stderr).toContain('docs.tigera.io/calico-enterprise');
    expect(plan.stderr).not.toMatch(/\n\s+at /);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('export still works: the data is in the same CRDs', async () => {
    const e = await runCli(['export', '--out', path.join(dir, 'bundle')]);
    expect(e.code, e.stderr).toBe(0);
    const files = Object.keys(JSON.parse(readFileSync(path.join(dir, 'bundle', 'manifest.json'), 'utf8')).files);
    expect(files.filter((f) => f.includes('Installation'))).not.toEqual([]);
  });
});
