/**
 * The real `helm` program for the tests (built from its Go module by test/helm/build.sh, cached outside the
 * repository) and Calico's tigera-operator chart packaged from a release's source tree (test/helm/chart.sh). Each
 * helm run gets `home` as its HOME and Helm's config, cache and data folders, so nothing of a developer's own Helm
 * setup (repositories, plugins, registry logins) or kube cache takes part or is touched.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { packageRoot } from '../../src/core/package-root.js';
import { helmEnv } from '../../src/dev/local-cluster/calico-helm.js';

const run = promisify(execFile);
const script = (name: string) => path.join(packageRoot(), 'test', 'helm', name);

async function lastLine(args: string[], what: string): Promise<string> {
  // A cold helm build takes minutes (2 cores); the scripts fail with the reason on stderr.
  const { stdout } = await run('bash', args, { timeout: 20 * 60_000, maxBuffer: 16 * 1024 * 1024 }).catch((e) => {
    throw new Error(
      `${what} failed: ${String(e.stderr ?? e.message)
        .trim()
        .split('\n')
        .slice(-5)
        .join(' | ')}`,
      { cause: e },
    );
  });
  const out = stdout.trim().split('\n').pop();
  if (!out) throw new Error(`${what} printed no path`);
  return out;
}

/** The real helm, Helm 4 unless `major` says 3. */
export const buildHelm = (major: 3 | 4 = 4): Promise<string> => lastLine([script('build.sh'), String(major)], `test/helm/build.sh ${major}`);

/** The tigera-operator chart archive of Calico `tag` (e.g. v3.28.1), versioned `tag` as Calico releases it. */
export const tigeraOperatorChart = (tag: string): Promise<string> => lastLine([script('chart.sh'), tag], `test/helm/chart.sh ${tag}`);

export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** A helm command against the cluster of `kubeconfig`, with its own state folders under `home`; `driver`: where Helm keeps releases. */
export async function helm(bin: string, kubeconfig: string, home: string, args: string[], driver: 'secret' | 'configmap' = 'secret'): Promise<HelmResult> {
  // Helm's own folders under `home` (the harness's settings), with the release storage asked for.
  const env = { ...helmEnv(kubeconfig, home), HELM_DRIVER: driver };
  return run(bin, args, { env, timeout: 5 * 60_000, maxBuffer: 64 * 1024 * 1024 }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e) => ({ code: typeof e.code === 'number' ? e.code : 1, stdout: String(e.stdout ?? ''), stderr: String(e.stderr ?? e.message) }),
  );
}

/**
 * `helm install` of the tigera-operator chart `chart` as release `release` in `namespace`, without the chart's
 * Installation and APIServer (installation.enabled=false, apiServer.enabled=false): no operator acts on them in the
 * tests that use it, where the operator Deployment, the CRDs and Helm's own record of the release are what counts.
 */
export async function installOperatorChart(run: (args: string[]) => Promise<HelmResult>, release: string, namespace: string, chart: string): Promise<void> {
  const r = await run([
    'install',
    release,
    chart,
    '-n',
    namespace,
    '--create-namespace',
    '--set',
    'installation.enabled=false',
    '--set',
    'apiServer.enabled=false',
  ]);
  if (r.code !== 0) throw new Error(`helm install ${release}: ${r.stderr.slice(-2000)}`);
}
