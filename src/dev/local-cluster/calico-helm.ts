/**
 * `up --calico V --install helm`: Calico installed the way the tigera-operator chart's docs say (`helm install calico
 * <chart> -n tigera-operator --create-namespace`, the chart's Installation and APIServer enabled), with the real
 * `helm` built from its Go module and the chart packaged from the release's own source tree (test/helm/build.sh and
 * chart.sh: the Helm e2e tests and this harness share one build and one cache). The chart's values carry what an
 * operator install of the harness applies from the release's custom-resources.yaml (the pools, the APIServer, and
 * from 3.30 Goldmane and Whisker), so the operator renders the same cluster either way and `up` waits for the same.
 * The scripts live in the source checkout's test/helm/ (not in the shipped package): they are run, never imported.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { imageTag } from '../../calico/knowledge.js';
import { loadRelease } from '../../calico/release.js';
import { packageRoot } from '../../core/package-root.js';
import type { KubeClient } from '../../kube/client.js';
import { applyManifests } from '../../kube/manifests.js';
import type { KubeObject } from '../../kube/types.js';
import { LOCAL_CALICO_NODES } from './calico-install.js';
import { BUILDABLE_OPERATORS } from './calico-programs.js';
import { createFakeNodes } from './nodes.js';

const run = promisify(execFile);

/** The release name and namespace the chart's docs use. */
export const HELM_RELEASE = { name: 'calico', namespace: 'tigera-operator' } as const;

const helmScript = (name: 'build.sh' | 'chart.sh') => path.join(packageRoot(), 'test', 'helm', name);

const vTag = (version: string) => (version.startsWith('v') ? version : `v${version}`);

/**
 * Calico tags whose source tree control-plane/build-calico.sh or calico-releases.pins pins (tag commit and archive
 * sha256): the charts chart.sh can package.
 */
export function pinnedCalicoSources(): string[] {
  const dir = path.join(packageRoot(), 'control-plane');
  const text = ['build-calico.sh', 'calico-releases.pins'].map((f) => readFileSync(path.join(dir, f), 'utf8')).join('\n');
  return [...text.matchAll(/^calico (v\d+\.\d+\.\d+) [0-9a-f]{40} [0-9a-f]{64}$/gm)].map((m) => m[1]!);
}

/**
 * One line saying why `--install helm` cannot install Calico `version` here, or undefined: its chart needs the
 * release's source pinned (chart.sh checks the archive against the pin), its operator must be one the harness
 * builds, and the scripts are only in a source checkout.
 */
export async function helmInstallRefusal(version: string): Promise<string | undefined> {
  const tag = vTag(version);
  if (!existsSync(helmScript('chart.sh'))) return `--install helm needs the source checkout's test/helm/ (helm and the chart are built from there)`;
  const pinned = pinnedCalicoSources();
  if (!pinned.includes(tag)) {
    return `--install helm: no Calico source pin for ${tag} in control-plane/build-calico.sh or calico-releases.pins to package its chart from (pinned: ${pinned.join(', ')})`;
  }
  const release = await loadRelease(tag, { offline: true, need: 'operator' });
  const opTag = imageTag(release.operatorImage);
  if (!BUILDABLE_OPERATORS.includes(opTag as (typeof BUILDABLE_OPERATORS)[number])) {
    return `--install helm: Calico ${tag}'s operator ${opTag ?? '(no image)'} is not one the local cluster builds (${BUILDABLE_OPERATORS.join(', ')})`;
  }
  return undefined;
}

/** The chart's value key of each resource custom-resources.yaml holds (the chart renders each from it). */
const CHART_KEY_OF_KIND: Readonly<Record<string, string>> = { Installation: 'installation', APIServer: 'apiServer', Goldmane: 'goldmane', Whisker: 'whisker' };

/**
 * The chart values standing for the release's custom-resources.yaml: each resource turns on the chart key of its
 * kind with its spec (the chart renders `installation` minus `enabled` as the Installation's spec). A kind the
 * chart has no key for is an error: the chart install would silently differ from the operator install.
 */
export function chartValuesFor(customResources: readonly KubeObject[]): Record<string, Record<string, unknown>> {
  const values: Record<string, Record<string, unknown>> = {};
  for (const o of customResources) {
    const key = CHART_KEY_OF_KIND[o.kind];
    if (!key) throw new Error(`custom-resources.yaml holds ${o.kind} ${o.metadata.name}, which the tigera-operator chart has no value for`);
    values[key] = { enabled: true, ...(o.spec ?? {}) };
  }
  return values;
}

async function lastLineOf(args: string[], what: string): Promise<string> {
  const { stdout } = await run('bash', args, { timeout: 30 * 60_000, maxBuffer: 16 * 1024 * 1024 }).catch((e) => {
    const tail = String(e.stderr ?? e.message)
      .trim()
      .split('\n')
      .slice(-3)
      .join(' | ');
    throw new Error(`${what} failed: ${tail}`, { cause: e });
  });
  const out = stdout.trim().split('\n').pop();
  if (!out) throw new Error(`${what} printed no path`);
  return out;
}

/** Whether the packaged chart carries a crds/ folder (up to 3.31; 3.32's README: "CRDs are no longer bundled"). */
async function chartBundlesCrds(chart: string): Promise<boolean> {
  const { stdout } = await run('tar', ['-tzf', chart], { maxBuffer: 16 * 1024 * 1024 });
  return stdout.split('\n').some((f) => /^[^/]+\/crds\//.test(f));
}

/** Helm's own folders under `home`, so nothing of the developer's Helm setup takes part; releases in Secrets (its default). */
export function helmEnv(kubeconfig: string, home: string): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home,
    KUBECONFIG: kubeconfig,
    HELM_CONFIG_HOME: path.join(home, 'config'),
    HELM_CACHE_HOME: path.join(home, 'cache'),
    HELM_DATA_HOME: path.join(home, 'data'),
    HELM_DRIVER: 'secret',
  };
}

/**
 * `helm install calico <chart of V> -n tigera-operator --create-namespace -f <values>` on the local cluster, after
 * the two kwok nodes the rendered pods land on. `workDir` is the cluster's run folder (values file, helm's home).
 */
export async function installCalicoByHelm(
  client: KubeClient,
  version: string,
  cluster: { kubeconfig: string; workDir: string },
  log: (l: string) => void = () => {},
  helmMajor: 3 | 4 = 4,
): Promise<void> {
  const tag = vTag(version);
  const release = await loadRelease(tag, { offline: true, need: 'operator' });
  const [helm, chart] = [
    await lastLineOf([helmScript('build.sh'), String(helmMajor)], `test/helm/build.sh ${helmMajor}`),
    await lastLineOf([helmScript('chart.sh'), tag], `test/helm/chart.sh ${tag}`),
  ];
  await createFakeNodes(client, LOCAL_CALICO_NODES);
  if (!(await chartBundlesCrds(chart))) {
    // From 3.32 the chart leaves the CRDs to the crd.projectcalico.org.v1 chart, applied first server-side (the
    // chart's README: `helm template calico-crds ... | kubectl apply --server-side -f -`); the release's
    // operator-crds.yaml holds the same CRDs.
    log(`installing Calico ${release.version} (helm): the chart bundles no CRDs, applying the release's ${release.crds.length} first`);
    await applyManifests(client, release.crds, { fieldManager: 'cni-rewind-local-cluster' });
  }
  const dir = path.join(cluster.workDir, 'helm');
  mkdirSync(path.join(dir, 'home'), { recursive: true, mode: 0o700 });
  const valuesFile = path.join(dir, 'values.json');
  // JSON is YAML: helm reads it as a values file.
  writeFileSync(valuesFile, `${JSON.stringify(chartValuesFor(release.customResources), null, 2)}\n`);
  const { name, namespace } = HELM_RELEASE;
  log(`installing Calico ${release.version} (helm): helm install ${name} ${path.basename(chart)} -n ${namespace} --create-namespace -f ${valuesFile}`);
  await run(helm, ['install', name, chart, '-n', namespace, '--create-namespace', '-f', valuesFile], {
    env: helmEnv(cluster.kubeconfig, path.join(dir, 'home')),
    timeout: 10 * 60_000,
    maxBuffer: 16 * 1024 * 1024,
  }).catch((e) => {
    throw new Error(
      `helm install ${name} failed: ${String(e.stderr ?? e.message)
        .trim()
        .split('\n')
        .slice(-3)
        .join(' | ')}`,
      { cause: e },
    );
  });
}
