/**
 * Start-up benchmark (not a test): wall time of `cni-rewind --help`, `version`, `inspect <bundle>` and (with a
 * cluster) `status`, `export` of 100 objects and `doctor`, side by side with `kubectl --help` and `kubectl get
 * nodes` in the same run, the time from process start to the first request the cluster commands send, and which
 * heavy libraries each loads.
 *
 * Every round runs each command once as a fresh process (as a user runs it), in turn, so that the load of a shared
 * machine spreads over all of them alike; the figures are medians over the rounds. The commands that talk to the
 * cluster (kubectl get nodes too) reach it through a relay on 127.0.0.1 that notes when their first request arrives
 * (bench/first-request.ts). Then each command runs once more under a module trace (test/support/module-trace.ts):
 * the commands that need no cluster must load neither the Kubernetes client nor a cloud SDK nor a provider module.
 * As a control, the same trace must see them when they are loaded, so "none" means "not loaded", not "the trace
 * saw nothing".
 *
 *   npm run build && node dist/bench/startup.js [--runs 15] [--no-status] [--before DIR]
 * `--before DIR`: also time `status` of the build in DIR (DIR/dist/src/cli/main.js, e.g. an earlier commit built
 * beside this one) in the same rounds.
 * The cluster rows use $KUBECONFIG or the local cluster instance's ($CNI_REWIND_CLUSTER_NAME); they are left out
 * (and the section says so) when that kubeconfig does not exist. Set-up (not timed): the Calico 3.28.1 CRDs and 100
 * labelled IPAM handles for `export`. Writes the "Start-up" section of docs/BENCHMARKS.md.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { resourcePathFor } from '../src/bundle/paths.js';
import { BundleWriter } from '../src/bundle/writer.js';
import { readShippedFile } from '../src/calico/shipped.js';
import { packageRoot } from '../src/core/package-root.js';
import { toolVersion } from '../src/core/version.js';
import { KubeClient } from '../src/kube/client.js';
import { applyManifests, parseManifests } from '../src/kube/manifests.js';
import type { ResourceType } from '../src/kube/types.js';
import { heavyModules, moduleTrace, type ModuleTrace } from '../test/support/module-trace.js';
import { apiServerAddress, kubeconfigThroughRelay, startArrivalRelay, type ArrivalRelay } from './first-request.js';
import { arg, benchHeader, findKubectl, kubeconfigPath, median, replaceBenchmarkSection } from './lib.js';

const GOAL_MEDIAN_S = 0.3;
const GOAL_RATIO = 5;
/** Issue 33: a command that talks to the cluster sends its first request within half a second of its start. */
const GOAL_FIRST_REQUEST_S = 0.5;
/** Issue 33: `status` takes at most this many times `kubectl get nodes`, medians of the same run. */
const GOAL_STATUS_RATIO = 3;
const EXPORT_OBJECTS = 100;
const BENCH_LABEL = 'cni-rewind-bench-startup';
const HANDLE: ResourceType = { group: 'crd.projectcalico.org', version: 'v1', plural: 'ipamhandles', kind: 'IPAMHandle', namespaced: false };

interface Subject {
  label: string;
  /** The command line; a function when each run needs its own (export writes a new bundle each time). */
  argv: string[] | (() => string[]);
  /** Talks to the cluster: its first request is timed, and it may load the Kubernetes client. */
  cluster?: boolean;
  /** Not a cni-rewind command: timed only. */
  reference?: boolean;
  /** An earlier build, timed for comparison (`--before`): not held to the goals. */
  earlier?: boolean;
  /** Exit codes that mean "it ran" (doctor exits 1 or 2 when it finds something). */
  okCodes?: number[];
  times: number[];
  firstRequest: number[];
  modules?: number;
  heavy?: Map<string, string[]>;
}

const argvOf = (s: Subject) => (typeof s.argv === 'function' ? s.argv() : s.argv);

/** One run as a fresh process: wall seconds, and seconds to the first request the relay saw (cluster commands). */
async function timeRun(s: Subject, env: NodeJS.ProcessEnv, relay: ArrivalRelay): Promise<{ wall: number; first?: number }> {
  const argv = argvOf(s);
  relay.reset();
  const t0 = process.hrtime.bigint();
  // Asynchronous: the relay runs in this process and must see the arrival while the command runs.
  const child = spawn(argv[0]!, argv.slice(1), { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr = (stderr + d).slice(-400)));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  if (!(s.okCodes ?? [0]).includes(code ?? -1)) throw new Error(`${argv.join(' ')} exited ${code}: ${stderr}`);
  const arrival = relay.firstArrival();
  if (s.cluster && arrival === undefined) throw new Error(`${s.label}: the relay saw no request`);
  return { wall, first: s.cluster && arrival !== undefined ? Number(arrival - t0) / 1e9 : undefined };
}

async function tracedModules(trace: ModuleTrace, s: Subject, env: NodeJS.ProcessEnv): Promise<string[]> {
  const argv = argvOf(s);
  trace.reset();
  // Asynchronous for the same reason as timeRun: the cluster commands reach the API server through the relay.
  const child = spawn(argv[0]!, [...trace.nodeArgs, ...argv.slice(1)], { env: { ...env, ...trace.env }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr = (stderr + d).slice(-400)));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  if (!(s.okCodes ?? [0]).includes(code ?? -1)) throw new Error(`${argv.join(' ')} (traced) exited ${code}: ${stderr}`);
  return trace.modules();
}

async function sampleBundle(dir: string): Promise<string> {
  const w = await BundleWriter.open(path.join(dir, 'bundle'));
  for (let i = 0; i < 20; i++) {
    const pool = { apiVersion: 'crd.projectcalico.org/v1', kind: 'IPPool', metadata: { name: `pool-${i}` }, spec: { cidr: `10.${i}.0.0/16` } };
    await w.writeObject(resourcePathFor(pool as any), pool as any);
  }
  w.manifest.counts = { 'ippools.crd.projectcalico.org': 20 };
  return w.commit();
}

/** Set-up for the export row (not timed): the Calico CRDs and exactly EXPORT_OBJECTS labelled IPAM handles. */
async function exportObjects(kubeconfig: string): Promise<void> {
  const client = await KubeClient.connect({ kubeconfig });
  try {
    const crds = parseManifests(readShippedFile('3.28.1', 'tigera-operator.yaml')!.text).filter((o) => o.kind === 'CustomResourceDefinition');
    await applyManifests(client, crds, { fieldManager: 'cni-rewind-bench' });
    const have = new Set((await client.listAll(HANDLE, { labelSelector: BENCH_LABEL })).map((o) => o.metadata.name));
    for (let i = 0; i < EXPORT_OBJECTS; i++) {
      const name = `startup-${String(i).padStart(3, '0')}`;
      if (!have.has(name))
        await client.create(HANDLE, {
          apiVersion: 'crd.projectcalico.org/v1',
          kind: 'IPAMHandle',
          metadata: { name, labels: { [BENCH_LABEL]: 'true' } },
          spec: { handleID: name, block: { '10.0.0.0/26': 1 } },
        });
    }
  } finally {
    client.close();
  }
}

async function main(): Promise<void> {
  const runs = Number(arg('runs') ?? 15);
  const beforeDir = arg('before');
  const before = beforeDir ? path.resolve(beforeDir, 'dist/src/cli/main.js') : undefined;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-bench-startup-'));
  const trace = moduleTrace(dir);
  const cli = path.join(packageRoot(), 'dist/src/cli/main.js');
  const kubeconfig = kubeconfigPath();
  const withCluster = !process.argv.includes('--no-status') && fs.existsSync(kubeconfig);
  let relay: ArrivalRelay | undefined;
  try {
    relay = await startArrivalRelay(withCluster ? apiServerAddress(kubeconfig) : { host: '127.0.0.1', port: 1 });
    const env = { ...process.env, KUBECONFIG: withCluster ? kubeconfigThroughRelay(kubeconfig, dir, relay.port) : kubeconfig, NO_COLOR: '1' };
    if (withCluster) await exportObjects(kubeconfig);
    const kubectl = findKubectl();
    const bundle = await sampleBundle(dir);
    const node = process.execPath;
    let exports = 0;
    const subjects: Subject[] = [
      { label: 'kubectl --help', argv: [kubectl, '--help'], reference: true, times: [], firstRequest: [] },
      ...(withCluster ? [{ label: 'kubectl get nodes', argv: [kubectl, 'get', 'nodes'], reference: true, cluster: true, times: [], firstRequest: [] }] : []),
      { label: 'node -e 0', argv: [node, '-e', '0'], reference: true, times: [], firstRequest: [] },
      { label: 'cni-rewind --help', argv: [node, cli, '--help'], times: [], firstRequest: [] },
      { label: 'cni-rewind version', argv: [node, cli, 'version'], times: [], firstRequest: [] },
      { label: 'cni-rewind inspect <bundle>', argv: [node, cli, 'inspect', bundle], times: [], firstRequest: [] },
      ...(withCluster
        ? [
            { label: 'cni-rewind status', argv: [node, cli, 'status'], cluster: true, times: [], firstRequest: [] },
            {
              label: `cni-rewind export (${EXPORT_OBJECTS} objects)`,
              argv: () => [node, cli, 'export', '--out', path.join(dir, `export-${exports++}`), '-q'],
              cluster: true,
              times: [],
              firstRequest: [],
            },
            { label: 'cni-rewind doctor', argv: [node, cli, 'doctor'], cluster: true, okCodes: [0, 1, 2], times: [], firstRequest: [] },
          ]
        : []),
      // An earlier build's CLI in the same rounds, for a before/after comparison under the same load.
      ...(withCluster && before
        ? [{ label: `cni-rewind status (build in ${beforeDir})`, argv: [node, before, 'status'], cluster: true, earlier: true, times: [], firstRequest: [] }]
        : []),
    ];
    const progress = (line: string) => process.stderr.write(`bench/startup: ${line}\n`);
    progress('warm-up run of each command');
    for (const s of subjects) await timeRun(s, env, relay); // warm the file cache once
    for (let i = 0; i < runs; i++)
      for (const s of subjects) {
        if (s === subjects[0]) progress(`round ${i + 1}/${runs}`);
        const r = await timeRun(s, env, relay);
        s.times.push(r.wall);
        if (r.first !== undefined) s.firstRequest.push(r.first);
      }

    // Control: the trace sees the heavy libraries when they do load.
    const control = path.join(dir, 'control.mjs');
    fs.writeFileSync(
      control,
      `import { createRequire } from 'node:module';\nconst require = createRequire(${JSON.stringify(cli)});\nawait import(require.resolve('@kubernetes/client-node'));\n` +
        `const { builtinProviders } = await import(${JSON.stringify(path.join(packageRoot(), 'dist/src/providers/registry.js'))});\nawait builtinProviders.aws();\n`,
    );
    const controlHeavy = heavyModules(await tracedModules(trace, { label: 'control', argv: [node, control], times: [], firstRequest: [] }, env));
    if (!controlHeavy.has('@kubernetes/client-node') || !controlHeavy.has('AWS SDK'))
      throw new Error('control failed: the trace did not see client-node and the AWS SDK load; "none" below would prove nothing');
    progress('each command once more under the module trace');
    for (const s of subjects.filter((x) => !x.reference)) {
      const mods = await tracedModules(trace, s, env);
      s.modules = mods.filter((m) => m.startsWith('file:')).length;
      s.heavy = heavyModules(mods);
    }

    const kubectlMedian = median(subjects[0]!.times);
    const getNodes = subjects.find((s) => s.label === 'kubectl get nodes');
    const kubectlVersion = spawnSync(kubectl, ['version', '--client', '-o', 'json'], { encoding: 'utf8' }).stdout;
    const gitVersion = /"gitVersion":\s*"([^"]+)"/.exec(kubectlVersion)?.[1] ?? 'unknown';
    const light = subjects.filter((s) => s.label === 'cni-rewind --help' || s.label === 'cni-rewind version');
    const misses = light.flatMap((s) => {
      const m = median(s.times);
      const out: string[] = [];
      if (m > GOAL_MEDIAN_S) out.push(`\`${s.label}\` median ${m.toFixed(3)} s is over ${GOAL_MEDIAN_S} s`);
      if (m / kubectlMedian > GOAL_RATIO) out.push(`\`${s.label}\` is ${(m / kubectlMedian).toFixed(1)}x \`kubectl --help\` (goal at most ${GOAL_RATIO}x)`);
      return out;
    });
    const clusterMisses = subjects
      .filter((s) => s.cluster && !s.reference && !s.earlier)
      .flatMap((s) => {
        const out: string[] = [];
        const first = median(s.firstRequest);
        if (first > GOAL_FIRST_REQUEST_S) out.push(`\`${s.label}\` first request at ${first.toFixed(3)} s (median) is over ${GOAL_FIRST_REQUEST_S} s`);
        if (s.label === 'cni-rewind status' && getNodes && median(s.times) / median(getNodes.times) > GOAL_STATUS_RATIO)
          out.push(`\`status\` is ${(median(s.times) / median(getNodes.times)).toFixed(1)}x \`kubectl get nodes\` (goal at most ${GOAL_STATUS_RATIO}x)`);
        return out;
      });
    const heavyFor = (s: Subject) => (s.heavy?.size ? [...s.heavy].map(([k, v]) => `${k} (${v.length})`).join(', ') : 'none');
    const ratio = (s: Subject, ref: Subject | undefined) => (ref ? `${(median(s.times) / median(ref.times)).toFixed(1)}x` : '-');
    const section = [
      '## Start-up',
      '',
      benchHeader(
        'bench/startup.ts',
        `node dist/bench/startup.js --runs ${runs}${withCluster ? '' : ' --no-status'}${beforeDir ? ` --before ${beforeDir}` : ''}`,
        [`kubectl ${gitVersion}`, `cni-rewind ${toolVersion()}`],
      ),
      '',
      `${runs} rounds; each round runs every command below once, in turn, as a fresh process (wall clock, after one warm-up run each); medians over the rounds. ` +
        `\`inspect\` reads a 20-object bundle directory.` +
        (withCluster
          ? ` The cluster commands talk to the local control plane on 127.0.0.1 (\`export\`: the Calico 3.28.1 CRDs and ${EXPORT_OBJECTS} IPAM handles; \`status\` and \`doctor\`: the same cluster, Calico's CRDs and objects as earlier tests left them, no Calico program running) ` +
            'through a relay that notes when the first byte of their first request arrives (`bench/first-request.ts`): "first request" is that moment after the process was spawned, kubectl measured the same way.'
          : ' The cluster rows were left out: no cluster kubeconfig.'),
      '',
      '| command | median | min | max | median / `kubectl --help` | median / `kubectl get nodes` | first request (median, max) | ES/CommonJS files loaded | heavy libraries loaded |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---|',
      ...subjects.map((s) => {
        const m = median(s.times);
        const first = s.firstRequest.length ? `${median(s.firstRequest).toFixed(3)} s, ${Math.max(...s.firstRequest).toFixed(3)} s` : '-';
        return (
          `| \`${s.label}\` | ${m.toFixed(3)} s | ${Math.min(...s.times).toFixed(3)} s | ${Math.max(...s.times).toFixed(3)} s | ${ratio(s, subjects[0])} | ` +
          `${s.cluster ? ratio(s, getNodes) : '-'} | ${first} | ${s.modules ?? '-'} | ${s.reference ? '-' : heavyFor(s)} |`
        );
      }),
      '',
      `Goals: \`--help\` and \`version\` under ${GOAL_MEDIAN_S * 1000} ms median and at most ${GOAL_RATIO}x \`kubectl --help\`` +
        (withCluster
          ? `; every cluster command's first request within ${GOAL_FIRST_REQUEST_S} s of its start (median) and \`status\` at most ${GOAL_STATUS_RATIO}x \`kubectl get nodes\`. `
          : '. ') +
        (misses.length || clusterMisses.length
          ? `Missed in this run: ${[...misses, ...clusterMisses].join('; ')}; compare \`node -e 0\` (Node alone) in the same rounds.`
          : 'Met in this run.'),
      '',
      'How "none" is established: each command runs once more under a module trace (an ES module `resolve` hook and the CommonJS `require.cache` at exit, ' +
        '`test/support/module-trace.ts`) and no loaded file is under `@kubernetes/client-node`, `@aws-sdk/`, `@smithy/`, `@google-cloud/`, `google-gax` or `providers/<name>/`, ' +
        'nor is the bundled Kubernetes client (`dist/src/kube/kube-library.js`). ' +
        `Control in the same run: importing client-node and loading the aws provider through the registry makes the same trace see ${[...controlHeavy].map(([k, v]) => `${v.length} ${k}`).join(', ')} files. ` +
        '`src/cli/startup.test.ts` asserts the same for `--help`, `version` and `inspect` in the unit tests, and for `status`, `export` and `doctor` that they load the client as one bundled file and stay within a budget of module files.',
      '',
      'Why it is fast: `--help`, `--version` and `version` on their own are answered by `src/cli/main.ts` without loading yargs (the help text is the parser output ' +
        'rendered at build time, `src/cli/help-cache.ts`; `src/cli/fast-answers.test.ts` checks each answer equals the parser output); any other command line loads the ' +
        'parser (`src/cli/parser.ts`), which imports only the module of the command being run (`src/cli/commands/index.ts` is a table of names and descriptions); ' +
        'the CLI context imports the Kubernetes client when a command first asks for a client, and js-yaml loads only for `-o yaml`. The client is ' +
        'KubeConfig from `@kubernetes/client-node`, with what it uses, bundled into one file at build time (`tools/bundle-libraries.mjs`; as a package the library is about 900 module files): ' +
        "resolving and loading those files one by one was most of a cluster command's start before the first request; yargs is bundled the same way (about 40 files), " +
        'and cli-progress (20 files) loads when the first progress bar is drawn. The requests go over HTTP/2 where the API server offers it, as kubectl does ' +
        "(`src/kube/transport.ts`): a command's requests in flight share one TLS connection, where over HTTP/1.1 each needed its own handshake (`status` sends 8 at once); " +
        'and `status` lists CRDs as metadata only, not their schemas. ' +
        'And yargs no longer renders the help text of the command being run on the way (`src/cli/parser.ts`: it did so in case the handler showed it, which none does).',
      '',
    ].join('\n');
    replaceBenchmarkSection('Start-up', section);
    process.stdout.write(section + '\n');
    const bad = subjects.filter((s) => !s.cluster && s.heavy?.size);
    if (bad.length) throw new Error(`heavy libraries were loaded by: ${bad.map((b) => `${b.label} (${heavyFor(b)})`).join(', ')}`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`bench/startup: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
