/**
 * `npm run cluster -- up --calico 3.28.1 --install helm` (issue 31, item 2): Calico installed the way the
 * tigera-operator chart's docs say, by the real helm (test/helm/build.sh) with the chart packaged from the release's
 * source tree (test/helm/chart.sh), the chart's Installation and APIServer enabled. The real operator runs from the
 * Deployment Helm created (the supervisor maps it by image tag) and `up` returns only once what it waits for with
 * the operator install holds (v3 API, TigeraStatus, the default pool, the node side). Runs the built cluster CLI on
 * this file's slot cluster, as cluster-up-ready.test.ts does; Helm's release and the harness's Calico are removed after.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadRelease } from '../../src/calico/release.js';
import { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import { buildHelm, helm } from '../support/helm.js';
import { clearCalicoFinalizers } from './calico-support.js';
import { clusterCli } from './helm-support.js';
import { deleteNodes, explain, kubeconfig, operatorType, resetCalico, runCli, testClient } from './helpers.js';

const run = promisify(execFile);
const NS = 'tigera-operator';

describe('npm run cluster -- up --calico 3.28.1 --install helm', () => {
  const cluster = new LocalCluster({ name: process.env.CNI_REWIND_CLUSTER_NAME ?? 'e2e' });
  let client: KubeClient;
  let helmBin: string;
  let home: string;
  const h = (args: string[]) => helm(helmBin, kubeconfig(), home, args);

  const cleanUp = async () => {
    await cluster.stopCalico();
    // --no-hooks: the chart's pre-delete hook is a Job running the operator's clean-up, which no kwok pod runs.
    if (helmBin && (await h(['status', 'calico', '-n', NS])).code === 0) {
      const r = await h(['uninstall', 'calico', '-n', NS, '--no-hooks']);
      expect(r.code, `helm uninstall: ${r.stderr}`).toBe(0);
    }
    await clearCalicoFinalizers(client);
    await resetCalico(client);
    await deleteNodes(client, 'local-node-');
  };
  beforeAll(async () => {
    client = await testClient();
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-cluster-helm-'));
    helmBin = await buildHelm();
    await cleanUp();
  }, 1_500_000);
  afterAll(async () => {
    if (client) await cleanUp();
    client?.close();
    if (home) fs.rmSync(home, { recursive: true, force: true });
  }, 600_000);

  it('refuses a Calico without a source pin in one line (exit 2), before anything is installed', async () => {
    const r = await clusterCli(['up', '--calico', '3.33.0', '--install', 'helm']);
    expect(r.code, r.stderr).toBe(2);
    // One line: the usage text would not help, the version is what is wrong.
    expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(r.stderr.split('\n')[0]).toMatch(
      /^cluster: --install helm: no Calico source pin for v3\.33\.0 in control-plane\/build-calico\.sh or calico-releases\.pins to package its chart from \(pinned: .*v3\.28\.1.*\)$/,
    );
    expect(await client.getOrUndefined(K.namespace, undefined, NS)).toBeUndefined();
  });

  it('installs the chart release and returns with the operator of Helm’s Deployment running and Calico usable', async () => {
    const started = Date.now();
    const up = await clusterCli(['up', '--calico', '3.28.1', '--install', 'helm']);
    console.log(`cluster up --calico 3.28.1 --install helm returned after ${((Date.now() - started) / 1000).toFixed(1)} s`);
    expect(up.code, up.stderr.slice(-3000)).toBe(0);
    expect(up.stderr).toMatch(
      /installing Calico v3\.28\.1 \(helm\): helm install calico tigera-operator-v3\.28\.1\.tgz -n tigera-operator --create-namespace -f /,
    );

    // Helm's view: one release, deployed, the chart as Calico releases it.
    const list = await h(['list', '-n', NS, '-o', 'json']);
    expect(list.code, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout).map((r: Record<string, string>) => [r.name, r.status, r.chart, r.app_version, r.revision])).toEqual([
      ['calico', 'deployed', 'tigera-operator-v3.28.1', 'v3.28.1', '1'],
    ]);

    // The operator Deployment is Helm's, and its image tag is the operator the supervisor runs.
    const deployment = await client.get(K.deployment, NS, 'tigera-operator');
    expect(deployment.metadata.annotations).toMatchObject({ 'meta.helm.sh/release-name': 'calico', 'meta.helm.sh/release-namespace': NS });
    expect(deployment.metadata.labels).toMatchObject({ 'app.kubernetes.io/managed-by': 'Helm' });
    const image: string = deployment.spec.template.spec.containers.find((c: { name: string }) => c.name === 'tigera-operator').image;
    expect(image).toBe('quay.io/tigera/operator:v1.34.3');
    expect(cluster.calicoStatus()?.operator).toMatchObject({ tag: 'v1.34.3', pid: expect.any(Number) });

    // The chart's Installation carries the pools of the release's custom-resources.yaml, as the operator install has.
    const release = await loadRelease('v3.28.1', { offline: true, need: 'operator' });
    const expectedPools = release.customResources.find((o) => o.kind === 'Installation')!.spec.calicoNetwork.ipPools;
    const installation = await client.get(operatorType('installations', 'Installation'), undefined, 'default');
    expect(installation.metadata.labels).toMatchObject({ 'app.kubernetes.io/managed-by': 'Helm' });
    expect(installation.spec.calicoNetwork.ipPools).toMatchObject(expectedPools);

    const tigeraStatus = await client.get(operatorType('tigerastatuses', 'TigeraStatus'), undefined, 'calico');
    expect(tigeraStatus.status.conditions.find((c: { type: string }) => c.type === 'Available')?.status).toBe('True');

    // The v3 API, through the aggregation layer, answers with the default pool the operator made.
    const kubectl = path.join(cluster.readState()!.binDir, 'kubectl');
    const pools = await run(kubectl, ['--kubeconfig', kubeconfig(), 'get', 'ippools.projectcalico.org', '-o', 'name']).catch(
      (err: { stderr?: string; message: string }) => ({ stdout: '', stderr: err.stderr || err.message }),
    );
    expect(`${pools.stdout}${pools.stderr}`).toBe('ippool.projectcalico.org/default-ipv4-ippool\n');

    // cni-rewind sees a Helm install, from Helm's own record.
    const status = await runCli(['status', '-o', 'json']);
    expect(status.code, explain(status)).toBe(0);
    expect(JSON.parse(status.stdout).calico.method).toMatchObject({
      method: 'operator-helm',
      helm: { release: 'calico', namespace: NS, chart: { name: 'tigera-operator', version: 'v3.28.1' }, revision: 1, status: 'deployed' },
    });

    // And the harness says how Calico is installed.
    const clusterStatus = await clusterCli(['status']);
    expect(clusterStatus.code, clusterStatus.stderr).toBe(0);
    expect(clusterStatus.stdout).toContain(
      'calico install: operator-helm (release tigera-operator/calico, chart tigera-operator v3.28.1, revision 1), Calico v3.28.1\n',
    );
  }, 1_900_000);
});
