/**
 * An air-gapped operator install (issue 31, item 5): the tigera operator and every Calico image come from a mirror
 * (`registry.example.internal`), the operator Deployment's image re-pointed there and the Installation's
 * `registry`/`imagePath` set. `plan --to 3.28.1` + `apply` must keep both: the target operator from the same mirror
 * (quay.io cannot be pulled there: the operator would stay down until wait-rollout timed out) and the Installation's
 * image settings unchanged. kwok pulls nothing, so what is checked is the image the Deployment gets and what apply
 * waited for; the supervisor runs the real v1.32.10 and then v1.34.3 operators by the image's tag. Then, on 3.28.1, the
 * operator pinned by tag and digest plans 3.29.7 from the same mirror, and a mirror path that does not end in
 * `tigera/operator` is refused by name (exit 5).
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { applyManifests } from '../../src/kube/manifests.js';
import type { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { fixtureObjects, operatorType, runCli } from './helpers.js';
import { waitOperator, waitTigeraStatusAvailable, withRealCalico } from './calico-support.js';

const MIRROR = 'registry.example.internal';
const INSTALLATION = operatorType('installations', 'Installation');

describe('plan and apply of an operator install whose images come from a mirror (3.27.4 -> 3.28.1)', () => {
  const real = withRealCalico('mir');
  let client: KubeClient;
  let cluster: LocalCluster;
  let dir: string;

  beforeAll(async () => {
    client = real.client();
    cluster = real.cluster;
    dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-mirror-e2e-'));
    // As an air-gapped site installs it: the release's manifests with the images re-pointed to the mirror.
    const operator = fixtureObjects('3.27.4', 'tigera-operator.yaml').map((o) => {
      if (o.kind !== 'Deployment') return o;
      const c = o.spec.template.spec.containers[0];
      c.image = c.image.replace(/^quay\.io\//, `${MIRROR}/`);
      return o;
    });
    await applyManifests(client, operator, { fieldManager: 'cni-rewind-e2e' });
    const crs = fixtureObjects('3.27.4', 'custom-resources.yaml');
    Object.assign(crs.find((o) => o.kind === 'Installation')!.spec, { registry: `${MIRROR}/`, imagePath: 'calico' });
    await applyManifests(client, crs, { fieldManager: 'cni-rewind-e2e' });
    await waitOperator(cluster, 'v1.32.10');
    await waitTigeraStatusAvailable(client, 'calico');
  }, 20 * 60_000);

  it(
    'rolls the target operator out from the same mirror, says so in the plan, and keeps the Installation registry and imagePath',
    async () => {
      const bundle = path.join(dir, 'bundle');
      const e = await runCli(['export', '--out', bundle]);
      expect(e.code, e.stderr).toBe(0);
      const planFile = path.join(dir, 'plan.yaml');
      const p = await runCli(['plan', '--to', '3.28.1', '--bundle', bundle, '--no-disk-snapshots', '--out', planFile, '-o', 'json']);
      expect(p.code, p.stderr).toBe(0);
      const plan = JSON.parse(p.stdout);
      expect(plan.current).toMatchObject({ version: 'v3.27.4', operatorImage: `${MIRROR}/tigera/operator:v1.32.10` });
      // The human plan says where the operator comes from in one line.
      const table = await runCli(['plan', '--to', '3.28.1', '--bundle', bundle, '--no-disk-snapshots']);

      const a = await runCli(['apply', planFile, '--yes', '-o', 'json']);
      const dep = await client.get(K.deployment, 'tigera-operator', 'tigera-operator');
      // The image an air-gapped cluster can pull: the target's tag under the mirror, never quay.io's.
      expect(dep.spec.template.spec.containers[0].image, a.stderr).toBe(`${MIRROR}/tigera/operator:v1.34.3`);
      expect(a.code, a.stderr + a.stdout).toBe(0);
      expect(plan.target.operatorImage).toBe(`${MIRROR}/tigera/operator:v1.34.3`);
      expect(plan.findings.find((f: any) => f.id === 'operator-image-mirror')).toMatchObject({ action: 'transform' });
      expect(table.stdout + table.stderr).toContain(`operator image from mirror ${MIRROR}:`);
      const res = JSON.parse(a.stdout);
      expect(res.steps.find((s: any) => s.id === 'wait-rollout').summary).toContain(`operator ${MIRROR}/tigera/operator:v1.34.3 available`);
      await waitOperator(cluster, 'v1.34.3', 10_000);

      const inst = await client.get(INSTALLATION, undefined, 'default');
      expect(inst.spec).toMatchObject({ registry: `${MIRROR}/`, imagePath: 'calico' });
      // The v1.34.3 operator renders calico-node from the mirror too (the Installation's registry and imagePath).
      const node = await client.get(K.daemonSet, 'calico-system', 'calico-node');
      expect(node.spec.template.spec.containers.find((c: any) => c.name === 'calico-node').image).toBe(`${MIRROR}/calico/node:v3.28.1`);
    },
    20 * 60_000,
  );

  it(
    'a digest beside the tag keeps the mirror (the digest named); a mirror path that does not end in tigera/operator is refused by name',
    async () => {
      const bundle = path.join(dir, 'bundle-328');
      const e = await runCli(['export', '--out', bundle]);
      expect(e.code, e.stderr).toBe(0);
      const digest = `sha256:${'c'.repeat(64)}`;
      const setImage = (image: string) =>
        client.mergePatch(K.deployment, 'tigera-operator', 'tigera-operator', {
          spec: { template: { spec: { containers: [{ name: 'tigera-operator', image }] } } },
        });
      await setImage(`${MIRROR}/tigera/operator:v1.34.3@${digest}`);
      const p = await runCli(['plan', '--to', '3.29.7', '--bundle', bundle, '--no-disk-snapshots', '-o', 'json']);
      expect(p.code, p.stderr).toBe(0);
      const plan = JSON.parse(p.stdout);
      expect(plan.target.operatorImage).toBe(`${MIRROR}/tigera/operator:v1.36.16`);
      expect(plan.findings.find((f: any) => f.id === 'operator-image-mirror').details.join(' ')).toContain(`pinned by digest ${digest}`);

      await setImage(`${MIRROR}/calico-operator:v1.34.3`);
      const r = await runCli(['plan', '--to', '3.29.7', '--bundle', bundle, '--no-disk-snapshots']);
      expect(r.code, r.stdout + r.stderr).toBe(5);
      expect(r.stderr).toContain(`the operator image ${MIRROR}/calico-operator:v1.34.3 comes from another repository than quay.io/tigera/operator`);
      expect(r.stderr).toMatch(/--manifests/);
    },
    10 * 60_000,
  );
});
