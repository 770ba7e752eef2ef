/**
 * A calico.yaml install whose images come from a mirror and are pinned by digest alone (issue 31, item 5), on the
 * real control plane (kwok runs the pods). While nothing in the cluster names the release (calico-node has not
 * written ClusterInformation), `plan` refuses by name: a digest names no version. Once it does, `plan --to 3.27.4`
 * carries the mirror into the target calico.yaml (by tag, the digest said) and `apply` rolls those images out,
 * never the release's registry, which an air-gapped cluster cannot pull.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { deleteNodes, runCli, testClient } from './helpers.js';
import { freshManifestCluster, calicoNodeStarted, fixtures, images, installCalicoManifest, REGISTRY, RELEASE_REPO } from './plan-manifest-support.js';

const DIGEST = `sha256:${'e'.repeat(64)}`;
const WORKLOADS = [
  { type: K.daemonSet, name: 'calico-node' },
  { type: K.deployment, name: 'calico-kube-controllers' },
];

describe('plan and apply of a calico.yaml install pulling from a mirror by digest alone (3.28.1 -> 3.27.4)', () => {
  let client: KubeClient;
  let dir: string;

  beforeAll(async () => {
    client = await testClient();
    dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-mirror-manifest-e2e-'));
    await freshManifestCluster(client, 'fpm-');
    // Installed from the mirror by tag (with the admins' other edits), then pinned by digest as a policy may demand.
    await installCalicoManifest(client, '3.28.1');
    for (const w of WORKLOADS) {
      const live = await client.get(w.type, 'kube-system', w.name);
      const spec = live.spec.template.spec;
      for (const c of [...(spec.initContainers ?? []), ...spec.containers]) c.image = `${c.image.replace(/:[^:/]+$/, '')}@${DIGEST}`;
      await client.replace(w.type, live);
    }
  }, 600_000);
  afterAll(async () => {
    await deleteNodes(client, 'fpm-');
    client.close();
  });

  it(
    'refuses while nothing names the release, then plans and rolls out the target from the same mirror',
    async () => {
      const bundle = path.join(dir, 'bundle');
      const e = await runCli(['export', '--out', bundle]);
      expect(e.code, e.stderr).toBe(0);
      const refused = await runCli(['plan', '--to', '3.27.4', '--manifests', fixtures, '--bundle', bundle, '--no-disk-snapshots']);
      expect(refused.code, refused.stdout + refused.stderr).toBe(5);
      expect(refused.stderr).toContain(`the image ${REGISTRY}node@${DIGEST} of DaemonSet kube-system/calico-node is pinned by digest`);

      await calicoNodeStarted(client, 'v3.28.1');
      const bundle2 = path.join(dir, 'bundle-2');
      expect((await runCli(['export', '--out', bundle2])).code).toBe(0);
      const planFile = path.join(dir, 'plan.yaml');
      const p = await runCli(['plan', '--to', '3.27.4', '--manifests', fixtures, '--bundle', bundle2, '--no-disk-snapshots', '--out', planFile, '-o', 'json']);
      expect(p.code, p.stderr).toBe(0);
      const plan = JSON.parse(p.stdout);
      expect(plan.transforms.manifest.repositories).toMatchObject({ [`${RELEASE_REPO}node`]: `${REGISTRY}node` });
      expect(plan.findings.find((f: any) => f.id === 'calico-manifest-edits').details).toContain(
        `image ${REGISTRY}node instead of ${RELEASE_REPO}node (pinned by digest ${DIGEST}; the target's is named by its tag)`,
      );

      const a = await runCli(['apply', planFile, '--yes', '-o', 'json']);
      expect(a.code, a.stderr + a.stdout).toBe(0);
      expect(images(await client.get(K.daemonSet, 'kube-system', 'calico-node'))).toEqual([
        `${REGISTRY}cni:v3.27.4`,
        `${REGISTRY}cni:v3.27.4`,
        `${REGISTRY}node:v3.27.4`,
        `${REGISTRY}node:v3.27.4`,
      ]);
      expect(images(await client.get(K.deployment, 'kube-system', 'calico-kube-controllers'))).toEqual([`${REGISTRY}kube-controllers:v3.27.4`]);
    },
    10 * 60_000,
  );
});
