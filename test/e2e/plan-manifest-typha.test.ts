/**
 * plan + apply for a calico-typha.yaml install (calico.yaml plus Typha in kube-system) against the real control
 * plane, from the upstream manifests (test/fixtures/calico-typha, unmodified): a plan to a calico.yaml without Typha
 * is refused by name (it would move calico-node and leave Typha at the old release, src/plan/typha.ts); the target's
 * calico-typha.yaml given with --manifests is planned and applied, and moves Typha with calico-node. kwok runs the
 * pods; calico-node and Typha themselves do not run here (ClusterInformation is written as calico-node would).
 */
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { applyManifests, parseManifests } from '../../src/kube/manifests.js';
import { packageRoot } from '../../src/core/package-root.js';
import { deleteNodes, resetCalico, runCli, testClient } from './helpers.js';
import { freshManifestCluster, calicoNodeStarted, fixtures, images } from './plan-manifest-support.js';

const NODES = ['typ-1', 'typ-2'];
const typhaText = (v: string) => gunzipSync(readFileSync(path.join(packageRoot(), 'test/fixtures/calico-typha', v, 'calico-typha.yaml.gz'))).toString('utf8');

/** Every workload of calico-typha.yaml `version` runs its images, rolled out on the kwok nodes. */
async function waitTyphaRollout(client: KubeClient, version: string): Promise<void> {
  const want = parseManifests(typhaText(version), version).filter((o) => o.kind === 'DaemonSet' || o.kind === 'Deployment');
  expect(want.map((w) => w.metadata.name).sort()).toEqual(['calico-kube-controllers', 'calico-node', 'calico-typha']);
  await client.waitFor(
    `calico-typha.yaml ${version} workloads rolled out`,
    async () => {
      for (const w of want) {
        const live = await client.getOrUndefined(w.kind === 'DaemonSet' ? K.daemonSet : K.deployment, 'kube-system', w.metadata.name);
        const s = live?.status ?? {};
        if (!live || images(live).join() !== images(w).join() || (s.observedGeneration ?? 0) < (live.metadata.generation ?? 0)) return undefined;
        const ready = w.kind === 'DaemonSet' ? s.numberAvailable === NODES.length && s.updatedNumberScheduled === NODES.length : s.availableReplicas >= 1;
        if (!ready) return undefined;
      }
      return true;
    },
    { timeoutMs: 180_000, intervalMs: 1000 },
  );
}

describe('plan and apply on a calico-typha.yaml install: Typha moves with calico-node, or the plan is refused', () => {
  let client: KubeClient;
  let dir: string;
  let bundle: string;

  beforeAll(async () => {
    client = await testClient();
    dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-plan-typha-e2e-'));
    await freshManifestCluster(client, 'typ-', NODES);
    // kubectl apply -f calico-typha.yaml (v3.28.1), as the upstream docs install it.
    await applyManifests(client, parseManifests(typhaText('3.28.1'), '3.28.1/calico-typha.yaml'), { fieldManager: 'kubectl' });
    await waitTyphaRollout(client, '3.28.1');
    await calicoNodeStarted(client, 'v3.28.1');
    bundle = path.join(dir, 'bundle');
    const e = await runCli(['export', '--out', bundle]);
    expect(e.code, e.stderr).toBe(0);
  }, 600_000);

  afterAll(async () => {
    await resetCalico(client);
    await deleteNodes(client, 'typ-');
    client.close();
  }, 300_000);

  it('a plan to calico.yaml (no Typha) is refused with exit 5, naming Typha and the target calico-typha.yaml', async () => {
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
      path.join(dir, 'refused.yaml'),
    ]);
    expect(p.code, p.stderr).toBe(5);
    // The refusal is the error line (after the progress lines naming the current and target release).
    expect(p.stderr.split('\n').find((l) => l.startsWith('cni-rewind: '))).toContain(
      'this calico.yaml install runs Typha (Deployment kube-system/calico-typha, docker.io/calico/typha:v3.28.1, from calico-typha.yaml)',
    );
    expect(p.stderr).toContain('https://raw.githubusercontent.com/projectcalico/calico/v3.27.4/manifests/calico-typha.yaml');
    expect(p.stderr).not.toMatch(/\n\s+at /);
  });

  it("the target's calico-typha.yaml given with --manifests is planned and applied: Typha and calico-node move to 3.27.4", async () => {
    // The layout --manifests takes: <folder>/<version>/manifests/calico.yaml, here each release's calico-typha.yaml.
    const manifests = path.join(dir, 'typha-manifests');
    for (const v of ['3.27.4', '3.28.1']) {
      mkdirSync(path.join(manifests, v, 'manifests'), { recursive: true });
      writeFileSync(path.join(manifests, v, 'manifests', 'calico.yaml'), typhaText(v));
    }
    const plan = path.join(dir, 'plan.yaml');
    const p = await runCli(['plan', '--to', '3.27.4', '--manifests', manifests, '--bundle', bundle, '--no-disk-snapshots', '--out', plan, '-o', 'json']);
    expect(p.code, p.stderr).toBe(0);
    // The live install is calico-typha.yaml as released: no edits to carry.
    expect(JSON.parse(p.stdout).findings.map((f: any) => f.id)).not.toContain('calico-manifest-edits');
    const a = await runCli(['apply', plan, '--yes', '-o', 'json']);
    expect(a.code, a.stderr + a.stdout).toBe(0);
    await waitTyphaRollout(client, '3.27.4');
    const typha = await client.get(K.deployment, 'kube-system', 'calico-typha');
    expect(images(typha)).toEqual(['docker.io/calico/typha:v3.27.4']);
    expect((await client.get(K.configMap, 'kube-system', 'calico-config')).data?.typha_service_name).toBe('calico-typha');
  }, 600_000);
});
