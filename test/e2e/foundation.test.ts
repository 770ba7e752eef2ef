import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../src/core/package-root.js';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { applyFixture, deleteNodes, resetCalico, runCli, testClient } from './helpers.js';

describe('foundation: real control plane, status', () => {
  let client: KubeClient;

  beforeAll(async () => {
    client = await testClient();
    await resetCalico(client);
    await deleteNodes(client, 'fnd-');
    await createFakeNodes(client, [
      { name: 'fnd-aws-1', providerID: 'aws:///us-east-1a/i-0123456789abcdef0' },
      { name: 'fnd-gce-1', providerID: 'gce://demo-project/europe-west1-b/fnd-gce-1' },
      { name: 'fnd-bare-1' },
    ]);
  });
  afterAll(async () => {
    await deleteNodes(client, 'fnd-');
    client.close();
  });

  it('talks to a real kube-apiserver built from Go modules', async () => {
    const v = await client.serverVersion();
    console.log(`kube-apiserver version: ${v.gitVersion}`);
    expect(v.gitVersion).toMatch(/^v1\.3[4-6]\.\d+$/);
    // The version control-plane/build.sh pins and builds: the test cluster is that build, not some other server.
    const pinned = /^K8S=(v[\d.]+)$/m.exec(readFileSync(path.join(packageRoot(), 'control-plane', 'build.sh'), 'utf8'))?.[1];
    expect(v.gitVersion).toBe(pinned);
  });

  it('reports no Calico on a bare cluster, with nodes and their providers', async () => {
    const r = await runCli(['status', '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const s = JSON.parse(r.stdout);
    expect(s.kubernetes.version).toMatch(/^v1\./);
    expect(s.calico.installType).toBe('none');
    const byName = Object.fromEntries(s.nodes.map((n: any) => [n.name, n]));
    expect(byName['fnd-aws-1']).toMatchObject({ provider: 'aws', providerID: 'aws:///us-east-1a/i-0123456789abcdef0', ready: true });
    expect(byName['fnd-gce-1']).toMatchObject({ provider: 'gcp' });
    expect(byName['fnd-bare-1']).toMatchObject({ provider: 'unknown' });
  });

  it('reports an operator install of v3.28.1 once its manifests and custom resources are applied', async () => {
    await applyFixture(client, '3.28.1', 'tigera-operator.yaml');
    await applyFixture(client, '3.28.1', 'custom-resources.yaml');
    // kwok makes the operator pod Ready; the Deployment becomes available through the real controllers.
    await client.waitFor(
      'tigera-operator available',
      async () => {
        const d = await client.get(K.deployment, 'tigera-operator', 'tigera-operator');
        return d.status?.availableReplicas === 1 ? true : undefined;
      },
      { timeoutMs: 120_000 },
    );
    const r = await runCli(['status', '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const s = JSON.parse(r.stdout);
    expect(s.calico).toMatchObject({ installType: 'operator', version: 'v3.28.1', operatorImage: 'quay.io/tigera/operator:v1.34.3' });
    expect(s.nodes.map((n: any) => n.name)).toEqual(expect.arrayContaining(['fnd-aws-1', 'fnd-gce-1', 'fnd-bare-1']));
    const table = await runCli(['status']);
    expect(table.stdout).toContain('v3.28.1 (operator install');
  });

  it('gives one clear line and exit 4 for an unreachable cluster, 2 for an unknown context', async () => {
    const { mkdtempSync, writeFileSync } = await import('node:fs');
    const dir = mkdtempSync('/tmp/cnr-kc-');
    writeFileSync(
      `${dir}/kc`,
      `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: abcdefgh}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n`,
    );
    const r = await runCli(['status', '--kubeconfig', `${dir}/kc`], { env: { CNI_REWIND_KUBE_RETRY_MS: '1000' } });
    expect(r.code).toBe(4);
    expect(r.stderr).toMatch(/cannot reach the Kubernetes API server/);
    expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    const r2 = await runCli(['status', '--context', 'nope']);
    expect(r2.code).toBe(2);
    expect(r2.stderr).toMatch(/context "nope" not found/);
  });
});
