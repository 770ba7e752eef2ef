/**
 * Start-up benchmark (not a test): wall time of `cni-rewind --help`, `version`, `inspect <bundle>` and (with a
 * cluster) `status`, side by side with `kubectl --help` in the same run, and which heavy libraries each loads.
 *
 * Every round runs each command once as a fresh process (as a user runs it), in turn, so that the load of a shared
 * machine spreads over all of them alike; the figures are medians over the rounds. Then each command runs once
 * more under a module trace (test/support/module-trace.ts): it must load neither @kubernetes/client-node nor a
 * cloud SDK nor a provider module (status excepted: it talks to the cluster). As a control, the same trace must see
 * them when they are loaded, so "none" means "not loaded", not "the trace saw nothing".
 *
 *   npm run build && node dist/bench/startup.js [--runs 15] [--no-status]
 * `status` uses $KUBECONFIG or the local cluster instance's ($CNI_REWIND_CLUSTER_NAME); it is left out (and the
 * section says so) when that kubeconfig does not exist. Writes the "Start-up" section of docs/BENCHMARKS.md.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { resourcePathFor } from '../src/bundle/paths.js';
import { BundleWriter } from '../src/bundle/writer.js';
import { packageRoot } from '../src/core/package-root.js';
import { toolVersion } from '../src/core/version.js';
import { heavyModules, moduleTrace, type ModuleTrace } from '../test/support/module-trace.js';
import { arg, benchHeader, findKubectl, kubeconfigPath, median, replaceBenchmarkSection } from './lib.js';

const GOAL_MEDIAN_S = 0.3;
const GOAL_RATIO = 5;

interface Subject {
  label: string;
  argv: string[];
  /** Allowed to load the Kubernetes client (it talks to the cluster). */
  cluster?: boolean;
  /** Not a cni-rewind command: timed only. */
  reference?: boolean;
  times: number[];
  modules?: number;
  heavy?: Map<string, string[]>;
}

function timeRun(argv: string[], env: NodeJS.ProcessEnv): number {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(argv[0]!, argv.slice(1), { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  if (r.status !== 0) throw new Error(`${argv.join(' ')} exited ${r.status}: ${r.stderr.toString().slice(-400)}`);
  return s;
}

function tracedModules(trace: ModuleTrace, argv: string[], env: NodeJS.ProcessEnv): string[] {
  trace.reset();
  const r = spawnSync(argv[0]!, [...trace.nodeArgs, ...argv.slice(1)], { env: { ...env, ...trace.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  if (r.status !== 0) throw new Error(`${argv.join(' ')} (traced) exited ${r.status}: ${r.stderr.toString().slice(-400)}`);
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

async function main(): Promise<void> {
  const runs = Number(arg('runs') ?? 15);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-bench-startup-'));
  const trace = moduleTrace(dir);
  const cli = path.join(packageRoot(), 'dist/src/cli/main.js');
  const kubeconfig = kubeconfigPath();
  const withStatus = !process.argv.includes('--no-status') && fs.existsSync(kubeconfig);
  const env = { ...process.env, KUBECONFIG: kubeconfig, NO_COLOR: '1' };
  try {
    const kubectl = findKubectl();
    const bundle = await sampleBundle(dir);
    const node = process.execPath;
    const subjects: Subject[] = [
      { label: 'kubectl --help', argv: [kubectl, '--help'], reference: true, times: [] },
      { label: 'node -e 0', argv: [node, '-e', '0'], reference: true, times: [] },
      { label: 'cni-rewind --help', argv: [node, cli, '--help'], times: [] },
      { label: 'cni-rewind version', argv: [node, cli, 'version'], times: [] },
      { label: 'cni-rewind inspect <bundle>', argv: [node, cli, 'inspect', bundle], times: [] },
      ...(withStatus ? [{ label: 'cni-rewind status', argv: [node, cli, 'status'], cluster: true, times: [] }] : []),
    ];
    for (const s of subjects) timeRun(s.argv, env); // warm the file cache once
    for (let i = 0; i < runs; i++) for (const s of subjects) s.times.push(timeRun(s.argv, env));

    // Control: the trace sees the heavy libraries when they do load.
    const control = path.join(dir, 'control.mjs');
    fs.writeFileSync(
      control,
      `import { createRequire } from 'node:module';\nconst require = createRequire(${JSON.stringify(cli)});\nawait import(require.resolve('@kubernetes/client-node'));\n` +
        `const { builtinProviders } = await import(${JSON.stringify(path.join(packageRoot(), 'dist/src/providers/registry.js'))});\nawait builtinProviders.aws();\n`,
    );
    const controlHeavy = heavyModules(tracedModules(trace, [node, control], env));
    if (!controlHeavy.has('@kubernetes/client-node') || !controlHeavy.has('AWS SDK'))
      throw new Error('control failed: the trace did not see client-node and the AWS SDK load; "none" below would prove nothing');
    for (const s of subjects.filter((x) => !x.reference)) {
      const mods = tracedModules(trace, s.argv, env);
      s.modules = mods.filter((m) => m.startsWith('file:')).length;
      s.heavy = heavyModules(mods);
    }

    const kubectlMedian = median(subjects[0]!.times);
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
    const heavyFor = (s: Subject) => (s.heavy?.size ? [...s.heavy].map(([k, v]) => `${k} (${v.length})`).join(', ') : 'none');
    const section = [
      '## Start-up',
      '',
      benchHeader('bench/startup.ts', `node dist/bench/startup.js --runs ${runs}${withStatus ? '' : ' --no-status'}`, [
        `kubectl ${gitVersion}`,
        `cni-rewind ${toolVersion()}`,
      ]),
      '',
      `${runs} rounds; each round runs every command below once, in turn, as a fresh process (wall clock, after one warm-up run each); medians over the rounds. ` +
        `\`inspect\` reads a 20-object bundle directory.${withStatus ? ' `status` talks to the local control plane on 127.0.0.1.' : ' `status` was left out: no cluster kubeconfig.'}`,
      '',
      '| command | median | min | max | median / `kubectl --help` | ES/CommonJS files loaded | heavy libraries loaded |',
      '|---|---:|---:|---:|---:|---:|---|',
      ...subjects.map((s) => {
        const m = median(s.times);
        return `| \`${s.label}\` | ${m.toFixed(3)} s | ${Math.min(...s.times).toFixed(3)} s | ${Math.max(...s.times).toFixed(3)} s | ${(m / kubectlMedian).toFixed(1)}x | ${s.modules ?? '-'} | ${s.reference ? '-' : heavyFor(s)} |`;
      }),
      '',
      `Goals: \`--help\` and \`version\` under ${GOAL_MEDIAN_S * 1000} ms median and at most ${GOAL_RATIO}x \`kubectl --help\`. ` +
        (misses.length ? `Missed in this run: ${misses.join('; ')}; compare \`node -e 0\` (Node alone) in the same rounds.` : 'Met in this run.'),
      '',
      'How "none" is established: each command runs once more under a module trace (an ES module `resolve` hook and the CommonJS `require.cache` at exit, ' +
        '`test/support/module-trace.ts`) and no loaded file is under `@kubernetes/client-node`, `@aws-sdk/`, `@smithy/`, `@google-cloud/`, `google-gax` or `providers/<name>/`. ' +
        `Control in the same run: importing client-node and loading the aws provider through the registry makes the same trace see ${[...controlHeavy].map(([k, v]) => `${v.length} ${k}`).join(', ')} files. ` +
        '`src/cli/startup.test.ts` asserts the same for `--help`, `version` and `inspect` in the unit tests.',
      '',
      'Why it is fast: `--help`, `--version` and `version` on their own are answered by `src/cli/main.ts` without loading yargs (the help text is the parser output ' +
        'rendered at build time, `src/cli/help-cache.ts`; `src/cli/fast-answers.test.ts` checks each answer equals the parser output); any other command line loads the ' +
        'parser (`src/cli/parser.ts`), which imports only the module of the command being run (`src/cli/commands/index.ts` is a table of names and descriptions); ' +
        'the CLI context imports the Kubernetes client when a command first asks for a client, and js-yaml loads only for `-o yaml`.',
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
