/**
 * `npm run cluster -- up --calico 3.28.1` returns when what it started is usable, as `kind create cluster --wait`
 * does: a script that goes on at once (`kubectl get ippools.projectcalico.org`, which the Calico API server answers
 * through the aggregation layer) finds the default pool. It runs the built cluster CLI as a user would, on this
 * file's slot cluster (already running: `up` installs Calico there and starts the supervisor), and kubectl built
 * with the control plane.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/core/package-root.js';
import { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import type { KubeClient } from '../../src/kube/client.js';
import { clearCalicoFinalizers } from './calico-support.js';
import { deleteNodes, kubeconfig, resetCalico, testClient } from './helpers.js';

const run = promisify(execFile);

describe('npm run cluster -- up --calico: ready when it returns', () => {
  const cluster = new LocalCluster({ name: process.env.CNI_REWIND_CLUSTER_NAME ?? 'e2e' });
  let client: KubeClient;

  const cleanUp = async () => {
    await cluster.stopCalico();
    await clearCalicoFinalizers(client);
    await resetCalico(client);
    await deleteNodes(client, 'local-node-');
  };
  beforeAll(async () => {
    client = await testClient();
    await cleanUp();
  }, 600_000);
  afterAll(async () => {
    if (client) await cleanUp();
    client?.close();
  }, 600_000);

  it('kubectl get ippools.projectcalico.org straight after `up --calico 3.28.1` lists the default pool', async () => {
    const cli = path.join(packageRoot(), 'dist', 'src', 'dev', 'local-cluster', 'cli.js');
    const started = Date.now();
    // The slot's name and port base are in this process's environment (cluster-setup.ts): `up` finds that cluster.
    const up = await run(process.execPath, [cli, 'up', '--calico', '3.28.1'], { timeout: 1_800_000, maxBuffer: 64 * 1024 * 1024 });
    console.log(`cluster up --calico 3.28.1 returned after ${((Date.now() - started) / 1000).toFixed(1)} s`);
    expect(up.stdout).toContain(`export KUBECONFIG=${kubeconfig()}`);
    const kubectl = path.join(cluster.readState()!.binDir, 'kubectl');
    const pools = await run(kubectl, ['--kubeconfig', kubeconfig(), 'get', 'ippools.projectcalico.org', '-o', 'name']).catch(
      (err: { stderr?: string; message: string }) => ({ stdout: '', stderr: err.stderr || err.message }),
    );
    expect(`${pools.stdout}${pools.stderr}`, `up's log:\n${up.stderr}`).toContain('ippool.projectcalico.org/default-ipv4-ippool');
  }, 1_900_000);
});
