import { execFile, spawn } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { applyManifests, parseManifests } from '../../src/kube/manifests.js';
import { pool } from '../../src/util/pool.js';
import type { KubeObject, ResourceType } from '../../src/kube/types.js';
import { packageRoot } from '../../src/core/package-root.js';
import { KILL_AFTER_STEP_ENV } from '../support/kill-after-step.js';
import { releaseFilePath, releaseText } from '../support/releases.js';

/** The kubeconfig of this file's cluster (set by cluster-setup.ts before the file is loaded). */
export function kubeconfig(): string {
  const file = process.env.KUBECONFIG;
  if (!file) throw new Error('KUBECONFIG is not set: end-to-end files run under the e2e project of vitest (test/e2e/cluster-setup.ts)');
  return file;
}

export async function testClient(): Promise<KubeClient> {
  return KubeClient.connect({ kubeconfig: kubeconfig() });
}

/** A shipped release file as a plain file, for commands that take a path (kubectl -f). */
export function fixturePath(version: string, file: string): string {
  return releaseFilePath(version, file);
}

export function fixtureObjects(version: string, file: string): KubeObject[] {
  return parseManifests(releaseText(version, file), `${version}/${file}`);
}

/** Apply a Calico release manifest from the fixtures (server-side, CRDs first). */
export async function applyFixture(client: KubeClient, version: string, file: string): Promise<KubeObject[]> {
  const objs = fixtureObjects(version, file);
  await applyManifests(client, objs, { fieldManager: 'cni-rewind-e2e' });
  return objs;
}

const CALICO_GROUPS = ['crd.projectcalico.org', 'operator.tigera.io', 'policy.networking.k8s.io'];
const CALICO_NAMESPACES = ['tigera-operator', 'calico-system', 'calico-apiserver'];

/** Remove every trace of Calico (CRDs and their objects, namespaces, cluster RBAC) so each test file starts clean. */
export async function resetCalico(client: KubeClient): Promise<void> {
  const crds = (await client.listAll(K.crd)).filter((c) => CALICO_GROUPS.includes(c.spec.group));
  await pool(crds, 8, async (c) => {
    await client.delete(K.crd, undefined, c.metadata.name);
  });
  for (const ns of CALICO_NAMESPACES) await client.delete(K.namespace, undefined, ns);
  for (const r of [K.clusterRole, K.clusterRoleBinding]) {
    for (const o of await client.listAll(r)) {
      if (/calico|tigera/.test(o.metadata.name)) await client.delete(r, undefined, o.metadata.name);
    }
  }
  await client.delete(K.configMap, 'kube-system', 'calico-config');
  await client.delete(K.daemonSet, 'kube-system', 'calico-node');
  await client.delete(K.deployment, 'kube-system', 'calico-kube-controllers');
  // calico.yaml's other kube-system objects: its PDB would otherwise linger and count in later drain preflights.
  await client.delete(K.pdb, 'kube-system', 'calico-kube-controllers');
  // calico-typha.yaml's Typha: its Deployment, Service and PDB (the PDB would count in drain preflights too).
  await client.delete(K.deployment, 'kube-system', 'calico-typha');
  await client.delete(K.service, 'kube-system', 'calico-typha');
  await client.delete(K.pdb, 'kube-system', 'calico-typha');
  for (const sa of ['calico-kube-controllers', 'calico-node', 'calico-cni-plugin']) await client.delete(K.serviceAccount, 'kube-system', sa);
  // The API server deletes a CRD once its finalizer removed every object of it; under the load of four clusters on
  // two cores this once took over 120 s (a rehearsal on 2026-12-07, after policy-rename.test.ts; 26 s alone). The
  // state names what is left and why, as the API server says it in the CRD's conditions.
  const leftCrds = async () => (await client.listAll(K.crd)).filter((c) => CALICO_GROUPS.includes(c.spec.group));
  await client.waitFor('Calico CRDs to be deleted', async () => ((await leftCrds()).length ? undefined : true), {
    timeoutMs: 240_000,
    state: async () =>
      (await leftCrds())
        .map((c) => {
          const cond = (c.status?.conditions ?? []).find((x: { type: string }) => x.type === 'Terminating');
          return `${c.metadata.name}${c.metadata.deletionTimestamp ? ' (deleting' : ' (not deleting'}${cond ? `: ${cond.reason} ${cond.message ?? ''}` : ''})`;
        })
        .join('; '),
  });
  await client.waitFor(
    'Calico namespaces to be deleted',
    async () => {
      for (const ns of CALICO_NAMESPACES) if (await client.getOrUndefined(K.namespace, undefined, ns)) return undefined;
      return true;
    },
    { timeoutMs: 180_000 },
  );
}

/** Delete all nodes whose name starts with a prefix (test-created kwok nodes). */
export async function deleteNodes(client: KubeClient, prefix: string): Promise<void> {
  for (const n of await client.listAll(K.node)) if (n.metadata.name.startsWith(prefix)) await client.delete(K.node, undefined, n.metadata.name);
}

export const calicoType = (plural: string, kind: string, namespaced = false): ResourceType => ({
  group: 'crd.projectcalico.org',
  version: 'v1',
  plural,
  kind,
  namespaced,
});
export const operatorType = (plural: string, kind: string): ResourceType => ({ group: 'operator.tigera.io', version: 'v1', plural, kind, namespaced: false });

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Run the built CLI as a user would (a child process), with the test cluster's kubeconfig. */
/** Node options that load the kill-after-step hook (test/support/kill-after-step.ts) when `env` names a step. */
function killHook(env: NodeJS.ProcessEnv): string[] {
  if (!env[KILL_AFTER_STEP_ENV]) return [];
  return ['--import', pathToFileURL(path.join(packageRoot(), 'dist', 'test', 'support', 'kill-after-step.js')).href];
}

export function runCli(
  args: string[],
  opts: {
    env?: Record<string, string>;
    cwd?: string;
    timeoutMs?: number;
    input?: string;
    onSpawn?: (child: import('node:child_process').ChildProcess) => void;
  } = {},
): Promise<CliResult> {
  const main = path.join(packageRoot(), 'dist', 'src', 'cli', 'main.js');
  const env = { ...process.env, KUBECONFIG: kubeconfig(), NO_COLOR: '1', ...opts.env };
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [...killHook(env), main, ...args],
      { env, cwd: opts.cwd, timeout: opts.timeoutMs ?? 600_000, maxBuffer: 256 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err ? (typeof (err as any).code === 'number' ? (err as any).code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
    if (opts.input !== undefined) child.stdin?.end(opts.input);
    opts.onSpawn?.(child);
  });
}

/**
 * What to show when a CLI run did not exit as expected: its failures first (from `-o json` output: the part a
 * truncated message would lose), then the tail of stderr, which holds the one-line error.
 */
export function explain(r: CliResult): string {
  let failures = '';
  try {
    const out = JSON.parse(r.stdout);
    if (Array.isArray(out?.failures) && out.failures.length) failures = `failures: ${JSON.stringify(out.failures, null, 1)}\n`;
  } catch {
    // not JSON: stdout is shown below
  }
  return `exit ${r.code}\n${failures}stderr (tail): ${r.stderr.slice(-4000)}\nstdout (head): ${r.stdout.slice(0, failures ? 500 : 2000)}`;
}

/** Start the built CLI as a child process the test can watch and interrupt (runCli waits for it instead). */
export function startCli(args: string[], env: Record<string, string> = {}) {
  let stdout = '';
  let stderr = '';
  const childEnv = { ...process.env, KUBECONFIG: kubeconfig(), NO_COLOR: '1', ...env };
  const child = spawn(process.execPath, [...killHook(childEnv), path.join(packageRoot(), 'dist', 'src', 'cli', 'main.js'), ...args], {
    env: childEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout.on('data', (b) => (stdout += b));
  child.stderr.on('data', (b) => (stderr += b));
  let exited = false;
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((res) =>
    child.on('exit', (code) => {
      exited = true;
      res({ code, stdout, stderr });
    }),
  );
  return { child, done, exited: () => exited, stderr: () => stderr };
}
