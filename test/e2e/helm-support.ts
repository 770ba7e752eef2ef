/**
 * What the e2e files on a Helm install of Calico share: the harness's cluster command, helm's own answers (history,
 * values) as data, and the clean-up that leaves the cluster without Calico and without the release.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'vitest';
import { packageRoot } from '../../src/core/package-root.js';
import type { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { HelmResult } from '../support/helm.js';
import { clearCalicoFinalizers } from './calico-support.js';
import { deleteNodes, resetCalico } from './helpers.js';

const run = promisify(execFile);
/** The namespace and release name `cluster up --install helm` uses. */
export const HELM_NS = 'tigera-operator';
export const HELM_RELEASE = 'calico';
type Helm = (args: string[]) => Promise<HelmResult>;

/** `npm run cluster -- ARGS` from the built harness, its exit code and output (never throws). */
export const clusterCli = (args: string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
  run(process.execPath, [path.join(packageRoot(), 'dist', 'src', 'dev', 'local-cluster', 'cli.js'), ...args], {
    timeout: 1_800_000,
    maxBuffer: 64 * 1024 * 1024,
  }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code?: number; stdout?: string; stderr?: string }) => ({ code: e.code ?? 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' }),
  );

export const helmOk = (r: HelmResult, what: string): void => expect(r.code, `${what}: ${r.stderr.slice(-2000)}`).toBe(0);

/** The release's revisions as [revision, status, chart]. */
export async function helmHistory(h: Helm): Promise<unknown[][]> {
  const r = await h(['history', HELM_RELEASE, '-n', HELM_NS, '-o', 'json']);
  helmOk(r, 'helm history');
  return JSON.parse(r.stdout).map((x: Record<string, unknown>) => [x.revision, x.status, x.chart]);
}

/** `helm get values`: the user-supplied values of the release's current revision. */
export async function helmValues(h: Helm): Promise<any> {
  const r = await h(['get', 'values', HELM_RELEASE, '-n', HELM_NS, '-o', 'json']);
  helmOk(r, 'helm get values');
  return JSON.parse(r.stdout);
}

/**
 * Calico's programs stopped, the release uninstalled (`helmBin` undefined: helm was never built, nothing to
 * uninstall), Calico's objects and the harness's nodes removed.
 */
export async function cleanUpHelmCalico(client: KubeClient, cluster: LocalCluster, h: Helm, helmBin: string | undefined): Promise<void> {
  await cluster.stopCalico();
  // --no-hooks: the chart's pre-delete hook is a Job running the operator's clean-up, which no kwok pod runs.
  if (helmBin && (await h(['status', HELM_RELEASE, '-n', HELM_NS])).code === 0)
    helmOk(await h(['uninstall', HELM_RELEASE, '-n', HELM_NS, '--no-hooks']), 'helm uninstall');
  await clearCalicoFinalizers(client);
  // The harness's operator pod finalizer outlives the stopped supervisor: taken off so the namespace can go.
  for (const pod of await client.listAll(K.pod, { namespace: HELM_NS }).catch(() => [])) {
    if (pod.metadata.finalizers?.length) await client.mergePatch(K.pod, HELM_NS, pod.metadata.name, { metadata: { finalizers: null } }).catch(() => undefined);
  }
  await resetCalico(client);
  await deleteNodes(client, 'local-node-');
}
