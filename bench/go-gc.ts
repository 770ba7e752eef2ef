/**
 * The Go garbage collector's share of the local cluster's CPU (not a test): two local clusters side by side, one
 * with Go's defaults and one with `GOGC`/`GOMEMLIMIT` set (default 400 / 3GiB), take the same write-heavy load at
 * the same time (Calico CRD objects and Secrets created, patched, listed and deleted, as the end-to-end files and
 * the tigera operators make them), and the CPU seconds each cluster's programs used are read from /proc before and
 * after. Both run in the same window on the same cores, so the load of the machine falls on both alike: the ratio
 * is the figure, not the seconds. Peak memory (VmHWM) of each kube-apiserver is reported beside it, since a higher
 * GOGC trades memory for CPU.
 *
 *   npm run build && node dist/bench/go-gc.js [--gogc 400] [--memlimit 3GiB] [--rounds 12] [--keep]
 *
 * It starts (and stops, unless --keep) the local cluster instances `bench-gc-default` and `bench-gc-tuned` on port
 * bases 28443 and 28643: nothing else may use those. Writes the "Go GC of the local cluster" section of
 * docs/BENCHMARKS.md.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { readShippedFile } from '../src/calico/shipped.js';
import { packageRoot } from '../src/core/package-root.js';
import { K } from '../src/kube/builtin.js';
import { KubeClient } from '../src/kube/client.js';
import { applyManifests, parseManifests } from '../src/kube/manifests.js';
import type { ResourceType } from '../src/kube/types.js';
import { arg, benchHeader, replaceBenchmarkSection } from './lib.js';

const HANDLE: ResourceType = { group: 'crd.projectcalico.org', version: 'v1', plural: 'ipamhandles', kind: 'IPAMHandle', namespaced: false };
const POLICY: ResourceType = { group: 'crd.projectcalico.org', version: 'v1', plural: 'networkpolicies', kind: 'NetworkPolicy', namespaced: true };
const PROGRAMS = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kwok'] as const;
const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());

interface Side {
  label: string;
  name: string;
  portBase: number;
  env: NodeJS.ProcessEnv;
  pids?: Record<string, number>;
  client?: KubeClient;
}

const cli = path.join(packageRoot(), 'dist/src/dev/local-cluster/cli.js');
const stateDir = (name: string) => path.join(os.homedir(), '.local/state/cni-rewind/local-cluster', name);

function clusterCommand(side: Side, command: 'up' | 'down'): void {
  const env = { ...side.env, CNI_REWIND_CLUSTER_NAME: side.name, CNI_REWIND_E2E_PORT_BASE: String(side.portBase) };
  const r = spawnSync(process.execPath, [cli, command], { env, stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`cluster ${command} ${side.name} exited ${r.status}: ${r.stderr.trim().split('\n').pop()}`);
}

/** utime + stime of a process, in seconds. */
function cpuSeconds(pid: number): number {
  // The command name (field 2) may hold spaces; the fields after its closing parenthesis are fixed.
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / CLK_TCK;
}

function peakRssMiB(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

function cpuByProgram(side: Side): Record<string, number> {
  return Object.fromEntries(PROGRAMS.map((p) => [p, cpuSeconds(side.pids![p]!)]));
}

/** At most `limit` of `fns` at a time. */
async function pool(limit: number, fns: (() => Promise<unknown>)[]): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < fns.length) await fns[next++]!();
    }),
  );
}

const handle = (round: number, i: number) => ({
  apiVersion: 'crd.projectcalico.org/v1',
  kind: 'IPAMHandle',
  metadata: { name: `gc-${round}-${i}`, labels: { bench: 'go-gc' } },
  spec: { handleID: `k8s-pod-network.${'0'.repeat(40)}${round}${i}`, block: { [`10.${round}.${i % 250}.0/26`]: 1 } },
});

const policy = (round: number, i: number) => ({
  apiVersion: 'crd.projectcalico.org/v1',
  kind: 'NetworkPolicy',
  metadata: { name: `gc-${round}-${i}`, namespace: 'default', labels: { bench: 'go-gc' } },
  spec: {
    tier: 'default',
    selector: `app == 'web-${i}'`,
    types: ['Ingress', 'Egress'],
    ingress: Array.from({ length: 10 }, (_, r) => ({
      action: 'Allow',
      protocol: 'TCP',
      source: { nets: [`10.${r}.0.0/16`] },
      destination: { ports: [80 + r] },
    })),
    egress: [{ action: 'Allow' }],
  },
});

const secret = (round: number, i: number) => ({
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: { name: `gc-${round}-${i}`, namespace: 'default', labels: { bench: 'go-gc' } },
  data: { 'tls.crt': Buffer.from('x'.repeat(2048)).toString('base64') },
});

/** One round: 120 IPAM handles, 30 policies and 40 Secrets created, each patched twice, listed, deleted. */
async function round(client: KubeClient, r: number): Promise<void> {
  const kinds: [ResourceType, (r: number, i: number) => any, number][] = [
    [HANDLE, handle, 120],
    [POLICY, policy, 30],
    [K.secret, secret, 40],
  ];
  const all = kinds.flatMap(([t, make, n]) => Array.from({ length: n }, (_, i) => ({ t, obj: make(r, i) })));
  const ns = (o: any) => o.metadata.namespace as string | undefined;
  await pool(
    8,
    all.map(
      ({ t, obj }) =>
        () =>
          client.create(t, obj),
    ),
  );
  for (const pass of [1, 2])
    await pool(
      8,
      all.map(
        ({ t, obj }) =>
          () =>
            client.mergePatch(t, ns(obj), obj.metadata.name, { metadata: { labels: { pass: String(pass) } } }),
      ),
    );
  for (let i = 0; i < 3; i++)
    for (const [t] of kinds) await client.listAll(t, { namespace: t.namespaced ? 'default' : undefined, labelSelector: 'bench=go-gc' });
  await pool(
    8,
    all.map(
      ({ t, obj }) =>
        () =>
          client.delete(t, ns(obj), obj.metadata.name),
    ),
  );
}

async function prepare(side: Side): Promise<void> {
  clusterCommand(side, 'down');
  clusterCommand(side, 'up');
  const state = JSON.parse(fs.readFileSync(path.join(stateDir(side.name), 'state.json'), 'utf8'));
  side.pids = state.pids;
  side.client = await KubeClient.connect({ kubeconfig: state.kubeconfig });
  const crds = parseManifests(readShippedFile('3.28.1', 'tigera-operator.yaml')!.text).filter((o) => o.kind === 'CustomResourceDefinition');
  await applyManifests(side.client, crds, { fieldManager: 'cni-rewind-bench' });
  for (const t of [HANDLE, POLICY])
    await side.client.waitFor(`${t.plural} served`, async () => (await side.client!.listAll(t, { namespace: t.namespaced ? 'default' : undefined })) && true, {
      timeoutMs: 60_000,
      intervalMs: 500,
    });
}

async function main(): Promise<void> {
  const gogc = arg('gogc') ?? '400';
  const memlimit = arg('memlimit') ?? '3GiB';
  const rounds = Number(arg('rounds') ?? 12);
  const keep = process.argv.includes('--keep');
  // Both sides say what they run with: the local cluster's own setting (component-args.ts goProgramEnv) applies
  // only where the caller set nothing, and the caller's own settings would blur the comparison.
  const base = { ...process.env };
  const sides: Side[] = [
    { label: 'Go defaults', name: 'bench-gc-default', portBase: 28443, env: { ...base, GOGC: '100', GOMEMLIMIT: String(2n ** 63n - 1n) } },
    { label: `GOGC=${gogc} GOMEMLIMIT=${memlimit}`, name: 'bench-gc-tuned', portBase: 28643, env: { ...base, GOGC: gogc, GOMEMLIMIT: memlimit } },
  ];
  try {
    for (const s of sides) await prepare(s);
    const before = sides.map(cpuByProgram);
    const walls = await Promise.all(
      sides.map(async (s) => {
        const t0 = Date.now();
        for (let r = 0; r < rounds; r++) await round(s.client!, r);
        return (Date.now() - t0) / 1000;
      }),
    );
    const after = sides.map(cpuByProgram);
    const used = sides.map((_, i) => Object.fromEntries(PROGRAMS.map((p) => [p, after[i]![p]! - before[i]![p]!])));
    const total = used.map((u) => Object.values(u).reduce((a, b) => a + b, 0));
    const rows = sides.map(
      (s, i) =>
        `| ${s.label} | ${walls[i]!.toFixed(1)} | ${used[i]!['kube-apiserver']!.toFixed(1)} | ${used[i]!.etcd!.toFixed(1)} | ${total[i]!.toFixed(1)} | ${peakRssMiB(s.pids!['kube-apiserver']!).toFixed(0)} |`,
    );
    const ratio = (k: 'kube-apiserver' | 'total') => (k === 'total' ? total[1]! / total[0]! : used[1]![k]! / used[0]![k]!);
    const objects = rounds * 190;
    const section = [
      '## Go GC of the local cluster',
      benchHeader('bench/go-gc.ts', `node dist/bench/go-gc.js --gogc ${gogc} --memlimit ${memlimit} --rounds ${rounds}`),
      '',
      `Two control planes side by side, the same load at the same time: ${rounds} rounds of 120 IPAM handles, 30 Calico`,
      `NetworkPolicies and 40 Secrets (${objects} objects in all) created, patched twice, listed three times and deleted.`,
      'CPU seconds of the cluster programs (utime + stime from /proc) over the load; peak RSS of kube-apiserver since it started.',
      '',
      '| Go settings | wall s | kube-apiserver CPU s | etcd CPU s | all programs CPU s | kube-apiserver peak RSS MiB |',
      '|---|---|---|---|---|---|',
      ...rows,
      '',
      `Ratio tuned / defaults: kube-apiserver CPU ${ratio('kube-apiserver').toFixed(2)}, all programs ${ratio('total').toFixed(2)}.`,
      '',
    ].join('\n');
    replaceBenchmarkSection('Go GC of the local cluster', section);
    console.log(section);
  } finally {
    for (const s of sides) s.client?.close();
    if (!keep) for (const s of sides) clusterCommand(s, 'down');
  }
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : String(err));
  process.exit(1);
});
