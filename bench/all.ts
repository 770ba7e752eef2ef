/**
 * `npm run bench`: the whole benchmark suite, each script in turn, against a local cluster instance it starts (and
 * stops again if it was not already up). Small sizes by default, so that it runs in minutes on a fresh clone;
 * `--big` runs the sizes the goals are stated for. Each script writes its own section of docs/BENCHMARKS.md.
 *
 *   npm run bench                 # small: start-up, export 1k, restore 1k, fan-out 1 and 20 nodes
 *   npm run bench -- --big        # export and restore 10k and 100k, fan-out 1, 50 and 200 nodes, the 1M estimate (about an hour)
 *   npm run bench -- --only startup,backup-fanout
 * Cluster instance: $CNI_REWIND_CLUSTER_NAME / $CNI_REWIND_E2E_PORT_BASE (default `bench` / 27443).
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { LocalCluster } from '../src/dev/local-cluster/cluster.js';
import { packageRoot } from '../src/core/package-root.js';
import { arg } from './lib.js';

const SUITE: { name: string; small: string[] | null; big: string[] }[] = [
  { name: 'startup', small: ['--runs', '9'], big: ['--runs', '21'] },
  { name: 'backup-fanout', small: ['--sizes', '1,20', '--moto-sizes', '1,20'], big: ['--sizes', '1,50,200', '--moto-sizes', '1,50,200'] },
  { name: 'export', small: ['--sizes', '1000'], big: ['--sizes', '10000,100000'] },
  { name: 'restore', small: ['--sizes', '1000'], big: ['--sizes', '10000,100000'] },
  // Needs two sizes of export and restore: from the tables the big runs wrote.
  { name: 'estimate', small: null, big: ['--target', '1000000'] },
];

async function main(): Promise<number> {
  const big = process.argv.includes('--big');
  const only = arg('only')?.split(',');
  const unknown = only?.filter((o) => !SUITE.some((s) => s.name === o));
  if (unknown?.length) throw new Error(`--only: unknown benchmark(s) ${unknown.join(', ')} (known: ${SUITE.map((s) => s.name).join(', ')})`);
  process.env.CNI_REWIND_CLUSTER_NAME ??= 'bench';
  process.env.CNI_REWIND_E2E_PORT_BASE ??= '27443';
  const cluster = new LocalCluster({ name: process.env.CNI_REWIND_CLUSTER_NAME, log: (l) => process.stderr.write(`[cluster] ${l}\n`) });
  const wasUp = await cluster.isUp();
  const { kubeconfig } = await cluster.up();
  const failed: string[] = [];
  try {
    for (const b of SUITE.filter((s) => (!only || only.includes(s.name)) && (big || s.small))) {
      const args = [path.join(packageRoot(), 'dist/bench', `${b.name}.js`), ...(big ? b.big : b.small!)];
      process.stderr.write(`\n== bench/${b.name}.ts: node ${args.map((a) => path.relative(packageRoot(), a) || a).join(' ')}\n`);
      const r = spawnSync(process.execPath, args, { stdio: 'inherit', env: { ...process.env, KUBECONFIG: kubeconfig } });
      if (r.status !== 0) failed.push(`${b.name} (exit ${r.status ?? r.signal})`);
    }
  } finally {
    if (!wasUp) await cluster.down();
  }
  if (failed.length) process.stderr.write(`\nbench: failed: ${failed.join(', ')}\n`);
  else process.stderr.write('\nbench: every section of docs/BENCHMARKS.md was rewritten\n');
  return failed.length ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`bench: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
