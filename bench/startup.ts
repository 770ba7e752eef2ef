/**
 * Start-up benchmark (not a test): wall time of `cni-rewind --help` and `cni-rewind status` (median of several
 * runs, each a fresh Node process as a user runs it), and proof that no cloud SDK is loaded for them.
 *
 * The proof: every run is made with `--import` of a module-resolution hook that records each URL Node resolves
 * (ESM import) to a file. The two SDKs (@aws-sdk/*, @google-cloud/*) and the provider modules (providers/*)
 * must not appear. As a control, the same hook must see the AWS SDK when the aws provider is loaded through the
 * registry, so an empty list means "not loaded", not "the hook saw nothing".
 *
 *   npx tsc -p . && node dist/src/local-cluster/cli.js up     # status needs a cluster
 *   node dist/bench/startup.js [--runs 9]
 * Uses $KUBECONFIG, or the kubeconfig of the local cluster instance ($CNI_REWIND_CLUSTER_NAME).
 * Writes the "Start-up" section of docs/BENCHMARKS.md.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { packageRoot } from '../src/local-cluster/paths.js';
import { arg, kubeconfigPath, replaceBenchmarkSection } from './lib.js';

const SDK = /@aws-sdk\/|@smithy\/|@google-cloud\/|google-gax|googleapis|\/providers\/(aws|gcp|libvirt|proxmox|vsphere)\//;



/** An --import module that registers a resolve hook appending every resolved URL to $CNR_MODULE_LOG. */
function writeHook(dir: string): string {
  const hooks = path.join(dir, 'hooks.mjs');
  fs.writeFileSync(
    hooks,
    `import { appendFileSync } from 'node:fs';\n` +
      `export async function resolve(spec, ctx, next) {\n  const r = await next(spec, ctx);\n  if (process.env.CNR_MODULE_LOG) appendFileSync(process.env.CNR_MODULE_LOG, r.url + '\\n');\n  return r;\n}\n`,
  );
  const register = path.join(dir, 'register.mjs');
  fs.writeFileSync(register, `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`);
  return register;
}

interface Run {
  seconds: number;
  modules: string[];
}

function run(args: string[], opts: { hook?: string; log: string; script?: string }): Run {
  fs.rmSync(opts.log, { force: true });
  const main = opts.script ?? path.join(packageRoot(), 'dist/src/cli/main.js');
  const nodeArgs = [...(opts.hook ? ['--import', pathToFileURL(opts.hook).href] : []), main, ...args];
  const t0 = process.hrtime.bigint();
  const r = spawnSync(process.execPath, nodeArgs, { env: { ...process.env, KUBECONFIG: kubeconfigPath(), NO_COLOR: '1', CNR_MODULE_LOG: opts.log }, stdio: ['ignore', 'pipe', 'pipe'] });
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  if (r.status !== 0) throw new Error(`${args.join(' ')} exited ${r.status}: ${r.stderr.toString().slice(-400)}`);
  const modules = fs.existsSync(opts.log) ? fs.readFileSync(opts.log, 'utf8').split('\n').filter(Boolean) : [];
  return { seconds, modules };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};


async function main(): Promise<void> {
  const runs = Number(arg('runs') ?? 9);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-bench-startup-'));
  const hook = writeHook(dir);
  const log = path.join(dir, 'modules.log');
  try {
    // Control: the hook does see the AWS SDK when the aws provider is loaded (through the registry, as backup does).
    const control = path.join(dir, 'control.mjs');
    fs.writeFileSync(control, `import { builtinProviders } from ${JSON.stringify(pathToFileURL(path.join(packageRoot(), 'dist/src/providers/registry.js')).href)};\nawait builtinProviders.aws();\n`);
    const c = run([], { hook, log, script: control });
    const controlSdk = c.modules.filter((m) => SDK.test(m));
    if (!controlSdk.some((m) => /@aws-sdk\//.test(m))) throw new Error('control failed: the hook did not see @aws-sdk when the aws provider was loaded; the check below would prove nothing');

    const rows: { cmd: string; median: number; min: number; max: number; modules: number; sdk: string[] }[] = [];
    for (const cmd of [['--help'], ['version'], ['status']]) {
      run(cmd, { log }); // warm the file cache once
      const times: number[] = [];
      for (let i = 0; i < runs; i++) times.push(run(cmd, { log }).seconds);
      const traced = run(cmd, { hook, log });
      const sdk = traced.modules.filter((m) => SDK.test(m));
      rows.push({ cmd: `cni-rewind ${cmd.join(' ')}`, median: median(times), min: Math.min(...times), max: Math.max(...times), modules: new Set(traced.modules).size, sdk });
      process.stderr.write(`${cmd.join(' ')}: median ${median(times).toFixed(3)} s, ${new Set(traced.modules).size} modules resolved, SDK modules: ${sdk.length}\n`);
    }
    const bad = rows.filter((r) => r.sdk.length);
    const when = new Date().toISOString().slice(0, 10);
    const section = [
      '## Start-up',
      '',
      `Measured by \`bench/startup.ts\` on ${when}: ${os.cpus().length} CPU cores shared with other work (load average ${os.loadavg()[0]!.toFixed(1)} at the end of the run), Node ${process.version}. ` +
        `Each figure is the median of ${runs} runs of a fresh \`node dist/src/cli/main.js ...\` process (wall clock, after one warm-up run); \`status\` talks to the local control plane on 127.0.0.1.`,
      '',
      '| command | median | min | max | ES modules resolved | cloud SDK / provider modules loaded |',
      '|---|---:|---:|---:|---:|---|',
      ...rows.map((r) => `| \`${r.cmd}\` | ${r.median.toFixed(2)} s | ${r.min.toFixed(2)} s | ${r.max.toFixed(2)} s | ${r.modules} | ${r.sdk.length ? r.sdk.length + ' (' + r.sdk.slice(0, 3).join(', ') + ')' : 'none'} |`),
      '',
      `How "none" is established: each command is run once more with \`--import\` of a module-resolution hook that logs every URL Node resolves; none matches ` +
        '`@aws-sdk/`, `@smithy/`, `@google-cloud/`, `google-gax` or `providers/<name>/`. Control in the same run: loading the aws provider through the registry ' +
        `(as \`backup --provider aws\` does) makes the same hook log ${controlSdk.length} such modules, so the hook does see them when they load. ` +
        'Built-in providers are imported lazily by name (`src/providers/registry.ts`), so a cloud SDK is loaded only by the commands that use its provider.',
      '',
      'Where the time goes: every command module is imported at start (about 1,000 ES modules: yargs, js-yaml, tar, diff, ajv and the engine), whatever the command; the cloud SDKs are not among them.',
      '',
    ].join('\n');
    replaceBenchmarkSection('Start-up', section);
    process.stdout.write(section + '\n');
    if (bad.length) throw new Error(`cloud SDK modules were loaded by: ${bad.map((b) => b.cmd).join(', ')}`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`bench/startup: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
