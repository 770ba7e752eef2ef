/**
 * Resource-restore benchmark (not a test): N IPAM handles lost the way the incident lost them (the CRD deleted,
 * its objects with it), brought back
 *   A. by cni-rewind's restore engine (restoreResources, --kinds IPAMHandle, the same code `restore --resources`
 *      runs), with the HTTP 429 answers it got counted by KubeClient.stats.throttled;
 *   B. by `kubectl apply --server-side -f <the same objects>` (one multi-document file), with its 429 answers
 *      counted from its -v=6 request log;
 * in the same run, from the same state. Both must end with exactly N handles, or the run fails.
 * cni-rewind's restore result carries its per-phase timings (RestoreResult.timings), printed as a breakdown.
 * Writes the "Restore" section of docs/BENCHMARKS.md after each size, so a run stopped at a larger size still
 * leaves the figures of the sizes it finished (the section says which sizes were asked for and which ran).
 *
 *   npx tsc -p . && node dist/src/dev/local-cluster/cli.js up
 *   node dist/bench/restore.js [--sizes 1000,10000,100000] [--concurrency 16] [--keep]
 *   node dist/bench/restore.js --engine-only [--repeat 3] [--against /other/checkout] [--sizes ...]
 * `--engine-only` runs only A, `--repeat` times per size, and prints each run's time and peak RSS without writing
 * docs/BENCHMARKS.md: for working on the engine's memory, where one run's peak is one draw of V8's collector.
 * `--against` runs the built worker of another checkout too, turn about with this one, from the same lost state.
 * Uses $KUBECONFIG, or the kubeconfig of the local cluster instance ($CNI_REWIND_CLUSTER_NAME).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import yaml from 'js-yaml';
import { openBundle } from '../src/bundle/reader.js';
import { exportBundle } from '../src/export/export.js';
import { deleteAllBlocks, deleteAllHandles, deleteHandles, etcdFor, putBlocks, putHandles } from './etcd.js';
import { RecordingIoHost, Reporter } from '../src/io/host.js';
import { KubeClient } from '../src/kube/client.js';
import { K } from '../src/kube/builtin.js';
import { stripServerFields } from '../src/kube/normalize.js';
import { applyManifests, parseManifests, waitCrdsEstablished } from '../src/kube/manifests.js';
import type { KubeObject, ResourceType } from '../src/kube/types.js';
import { readShippedFile } from '../src/calico/shipped.js';
import { packageRoot } from '../src/core/package-root.js';
import { pool } from '../src/util/pool.js';
import { arg, benchHeader, findKubectl, kubeconfigPath, replaceBenchmarkSection } from './lib.js';
import { DEFAULT_RESTORE_CONCURRENCY } from '../src/restore/restore.js';
import type { RestoreTimings } from '../src/restore/timings.js';

const HANDLE: ResourceType = { group: 'crd.projectcalico.org', version: 'v1', plural: 'ipamhandles', kind: 'IPAMHandle', namespaced: false };
const HANDLE_CRD = 'ipamhandles.crd.projectcalico.org';

async function countHandles(client: KubeClient): Promise<number> {
  let n = 0;
  for await (const page of client.listPages(HANDLE, { limit: 500 })) n += page.items.length;
  return n;
}

/**
 * Lose every IPAM handle as in the incident (delete the CRD), then put the empty CRD back for kubectl. The
 * handles are first removed from etcd (bench/etcd.ts): the API server would take minutes deleting 100k of them
 * one by one before the CRD goes, and that deletion is not what is measured.
 */
async function loseHandles(client: KubeClient, crd: KubeObject, recreate: boolean, n: number): Promise<void> {
  await deleteAllHandles(etcdFor(client.connection.server));
  await client.delete(K.crd, undefined, HANDLE_CRD);
  // The API server deletes a CRD's objects one by one before the CRD goes: allow for that with large N.
  await client.waitFor('ipamhandles CRD gone', async () => ((await client.getOrUndefined(K.crd, undefined, HANDLE_CRD)) ? undefined : true), {
    timeoutMs: 300_000 + 20 * n,
    intervalMs: 1000,
  });
  if (recreate) {
    await client.create(K.crd, crd);
    await waitCrdsEstablished(client, [HANDLE_CRD]);
  }
}

/** Exactly n handles: any others removed, the missing ones put into etcd (bench/etcd.ts), then seen by the API server. */
async function makeHandles(client: KubeClient, n: number): Promise<void> {
  const etcd = etcdFor(client.connection.server);
  await deleteAllHandles(etcd);
  await deleteAllBlocks(etcd);
  const names = Array.from({ length: n }, (_, i) => `k8s-pod-network.bench-${String(i).padStart(6, '0')}`);
  await putHandles(etcd, names);
  // The blocks that allocate each handle's address stay in the cluster when the handles are lost: restore brings
  // back a lost handle only when a live block still allocates to it (src/restore/ipam.ts), as after the incident.
  await putBlocks(etcd, names);
  // The API server's cache catches up with etcd through its watch; a list meanwhile may answer "too large resource version".
  await client.waitFor(`${n} IPAM handles listed`, async () => ((await countHandles(client).catch(() => -1)) === n ? true : undefined), {
    timeoutMs: 600_000,
    intervalMs: 2000,
  });
}

/**
 * The API server's own floor: F bare creates (POST, strict field validation, nothing else) of fresh handles, one at a
 * time and `concurrency` at a time, in ms per object. When more in flight is no faster per object, the API server
 * (and etcd) are the bottleneck, and no client can restore faster than that: kubectl's ms/object over this floor is
 * the largest ratio any restore could reach on that machine at that moment. The handles go again through etcd.
 */
async function serverFloor(client: KubeClient, n: number, concurrency: number): Promise<{ objects: number; one: number; many: number }> {
  const objects = Math.min(n, 2000);
  const perObject = async (inFlight: number, tag: string) => {
    const items = Array.from({ length: objects }, (_, i) => ({
      apiVersion: 'crd.projectcalico.org/v1',
      kind: 'IPAMHandle',
      metadata: { name: `floor-${tag}-${i}` },
      spec: { handleID: `floor-${tag}-${i}`, block: { '10.255.0.0/26': 1 }, deleted: false },
    }));
    const t = process.hrtime.bigint();
    await pool(items, inFlight, (o) => client.create(HANDLE, o, { fieldValidation: 'Strict' }));
    return Number(process.hrtime.bigint() - t) / 1e6 / objects;
  };
  const one = await perObject(1, 'a');
  const many = await perObject(concurrency, 'b');
  await deleteHandles(etcdFor(client.connection.server), 'floor-');
  return { objects, one, many };
}

/** The restore engine in a process of its own (bench/restore-worker.ts) under GNU time: wall time, peak RSS, its result. */
function runWorker(
  kubeconfig: string,
  bundle: string,
  concurrency: number,
  root = packageRoot(),
): {
  seconds: number;
  rssMiB: number;
  out: { ok: boolean; failures: { id: string; reason: string }[]; timings: RestoreTimings; stats: { requests: number; retries: number; throttled: number } };
} {
  const tf = path.join(os.tmpdir(), `cnr-bench-restore-time-${process.pid}`);
  const t0 = process.hrtime.bigint();
  const r = spawnSync(
    '/usr/bin/time',
    ['-f', '%M', '-o', tf, process.execPath, path.join(root, 'dist/bench/restore-worker.js'), kubeconfig, bundle, String(concurrency)],
    { encoding: 'utf8', maxBuffer: 64 << 20 },
  );
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  if (r.status !== 0) throw new Error(`restore worker failed (${r.status}): ${r.stderr.slice(-800)}`);
  const kib = Number(fs.readFileSync(tf, 'utf8').trim().split('\n').pop());
  fs.rmSync(tf, { force: true });
  return { seconds, rssMiB: kib / 1024, out: JSON.parse(r.stdout.trim().split('\n').pop()!) };
}

/** `--engine-only`: the restore engine alone, `--repeat` times from the same lost state; one line per run. */
async function engineOnly(setup: KubeClient, handleCrd: KubeObject, kubeconfig: string, out: string, n: number, concurrency: number): Promise<void> {
  const repeat = Number(arg('repeat') ?? 1);
  const roots = [packageRoot(), ...(arg('against') ? [path.resolve(arg('against')!)] : [])];
  for (let r = 1; r <= repeat; r++) {
    for (const root of roots) {
      step(n, `deleting the CRD (and its handles), run ${r} of ${repeat}, ${root}`);
      await loseHandles(setup, handleCrd, false, n);
      const w = runWorker(kubeconfig, out, concurrency, root);
      if (!w.out.ok) throw new Error(`restore of ${n} handles reported failures: ${w.out.failures.map((f) => `${f.id}: ${f.reason}`).join('; ')}`);
      const after = await countHandles(setup);
      if (after !== n) throw new Error(`cni-rewind restore left ${after} handles, expected ${n}`);
      const phases = PHASES.map(([key, label]) => `${label} ${sec(w.out.timings[key])}`).join(', ');
      process.stdout.write(`n=${n} run ${r} ${root}: ${w.seconds.toFixed(1)} s, peak RSS ${w.rssMiB.toFixed(0)} MiB (${phases})\n`);
    }
  }
}

interface Row {
  n: number;
  cni: number;
  cniRssMiB: number;
  cniThrottled: number;
  cniRequests: number;
  cniRetries: number;
  timings: RestoreTimings;
  kubectl: number;
  kubectl429: number;
  kubectlRequests: number;
  floor: { objects: number; one: number; many: number };
}

const PHASES: [keyof RestoreTimings, string][] = [
  ['readBundle', 'read bundle'],
  ['readCluster', 'read cluster'],
  ['schemaCheck', 'schema check'],
  ['plan', 'plan'],
  ['createCrds', 'create CRD + Established'],
  ['guards', 'operator pause / datastore lock'],
  ['write', 'write'],
  ['driftCheck', 'drift check'],
];

/** Where a long run is (stderr), so a run stopped early says which step it was in. */
const step = (n: number, what: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] n=${n}: ${what}\n`);
const fmt = (x: number) => x.toLocaleString('en-US');
const sec = (ms: number | undefined) => `${((ms ?? 0) / 1000).toFixed(1)} s`;

async function main(): Promise<void> {
  const sizes = (arg('sizes') ?? '1000,10000,100000')
    .split(',')
    .map(Number)
    .sort((a, b) => a - b);
  if (sizes.some((n) => !Number.isInteger(n) || n < 1)) throw new Error(`--sizes: whole numbers, comma-separated (got ${arg('sizes')})`);
  const concurrency = Number(arg('concurrency') ?? DEFAULT_RESTORE_CONCURRENCY);
  const kubeconfig = kubeconfigPath();
  const kubectl = findKubectl();
  const setup = await KubeClient.connect({ kubeconfig });
  const serverVersion = (await setup.serverVersion()).gitVersion;
  const kubectlVersion = (spawnSync(kubectl, ['version', '--client'], { encoding: 'utf8' }).stdout.match(/Client Version: (\S+)/) ?? [])[1] ?? '?';
  const crdObjs = parseManifests(readShippedFile('3.28.1', 'tigera-operator.yaml')!.text, 'tigera-operator.yaml').filter(
    (o) => o.kind === 'CustomResourceDefinition',
  );
  await applyManifests(setup, crdObjs, { fieldManager: 'cni-rewind-bench' });
  const handleCrd = crdObjs.find((c) => c.metadata.name === HANDLE_CRD)!;
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-bench-restore-'));
  const loadStart = os.loadavg()[0]!;
  const started = new Date();
  const rows: Row[] = [];
  try {
    for (const n of sizes) {
      // Start from exactly n handles (the previous size's handles are kept and topped up).
      step(n, 'creating handles');
      await makeHandles(setup, n);
      const have = await countHandles(setup);
      if (have !== n) throw new Error(`expected ${n} handles before the export, found ${have} (remove other IPAMHandles first)`);
      const out = path.join(work, `b-${n}`);
      step(n, 'exporting');
      await exportBundle(setup, { out, excludeSecrets: true }, new Reporter(new RecordingIoHost()));
      if (process.argv.includes('--engine-only')) {
        await engineOnly(setup, handleCrd, kubeconfig, out, n, concurrency);
        fs.rmSync(out, { recursive: true, force: true });
        continue;
      }
      // The same objects for kubectl, as a user would feed them: one file, server fields stripped.
      const file = path.join(work, `handles-${n}.yaml`);
      const bundle = await openBundle(out);
      const fd = fs.openSync(file, 'w');
      for await (const bo of bundle.objects({ kinds: ['IPAMHandle'] })) fs.writeSync(fd, '---\n' + yaml.dump(stripServerFields(bo.object)));
      fs.closeSync(fd);

      await bundle.close();
      // A. cni-rewind restore engine, in a process of its own (its peak RSS; its client's stats count only this restore).
      step(n, 'deleting the CRD (and its handles)');
      await loseHandles(setup, handleCrd, false, n);
      step(n, 'cni-rewind restore');
      const w = runWorker(kubeconfig, out, concurrency);
      const cni = w.seconds;
      const res = w.out;
      const cniStats = res.stats;
      if (!res.ok) throw new Error(`restore of ${n} handles reported failures: ${res.failures.map((f) => `${f.id}: ${f.reason}`).join('; ')}`);
      const afterA = await countHandles(setup);
      if (afterA !== n) throw new Error(`cni-rewind restore left ${afterA} handles, expected ${n}`);

      // B. kubectl apply --server-side -f, from the same state (CRD deleted, then the empty CRD back).
      step(n, 'deleting the CRD again, putting the empty CRD back');
      await loseHandles(setup, handleCrd, true, n);
      step(n, 'kubectl apply --server-side');
      const log = path.join(work, `kubectl-${n}.log`);
      const t1 = process.hrtime.bigint();
      const k = spawnSync(kubectl, ['--kubeconfig', kubeconfig, 'apply', '--server-side', '--field-manager', 'cni-rewind-bench', '-f', file, '-v=6'], {
        stdio: ['ignore', 'ignore', fs.openSync(log, 'w')],
      });
      const kt = Number(process.hrtime.bigint() - t1) / 1e9;
      const logText = fs.readFileSync(log, 'utf8');
      if (k.status !== 0) throw new Error(`kubectl apply failed (${k.status}): ${logText.slice(-500)}`);
      // -v=6 logs one line per response, with its status ("200 OK", "201 Created", "429 Too Many Requests").
      const k429 = (logText.match(/\b429 Too Many Requests/g) ?? []).length;
      const kRequests = (logText.match(/\b[1-5]\d\d [A-Z][A-Za-z ]+"? (in )?\d+ ?milliseconds|\bstatus="[1-5]\d\d /g) ?? []).length;
      const afterB = await countHandles(setup);
      if (afterB !== n) throw new Error(`kubectl apply left ${afterB} handles, expected ${n}`);
      step(n, 'the API server floor: bare creates, 1 and then many in flight');
      const floor = await serverFloor(setup, n, concurrency);
      rows.push({
        n,
        floor,
        cni,
        cniRssMiB: w.rssMiB,
        cniThrottled: cniStats.throttled,
        cniRequests: cniStats.requests,
        cniRetries: cniStats.retries,
        timings: res.timings,
        kubectl: kt,
        kubectl429: k429,
        kubectlRequests: kRequests,
      });
      process.stderr.write(
        `n=${n}: cni-rewind ${cni.toFixed(1)} s, ${w.rssMiB.toFixed(0)} MiB (${cniStats.requests} requests, ${cniStats.throttled} x 429; ${PHASES.map(([key, label]) => `${label} ${sec(res.timings[key])}`).join(', ')}), ` +
          `kubectl ${kt.toFixed(1)} s (${kRequests} requests, ${k429} x 429)\n`,
      );
      if (process.argv.includes('--keep')) fs.copyFileSync(log, path.join(work, `kubectl-${n}.kept.log`));
      fs.rmSync(out, { recursive: true, force: true });
      fs.rmSync(file, { force: true });
      // Written after each size: a run stopped at a larger size keeps what it measured.
      writeSection({ rows, sizes, concurrency, started, loadStart, serverVersion, kubectlVersion });
    }
  } finally {
    if (!process.argv.includes('--keep')) fs.rmSync(work, { recursive: true, force: true });
    else process.stderr.write(`kept ${work}\n`);
    setup.close();
  }
}

/**
 * Whether the restore's memory grows with N: the peak RSS of each size over the smallest's (issue 33 asks for
 * 100,000 under 250 MiB and within 25% of 10,000).
 */
function rssFlatness(rows: Row[]): string[] {
  if (rows.length < 2) return [];
  const first = rows[0]!;
  const growth = rows
    .slice(1)
    .map(
      (x) =>
        `${fmt(x.n)}: ${x.cniRssMiB.toFixed(0)} MiB, ${((x.cniRssMiB / first.cniRssMiB - 1) * 100).toFixed(0)}% over ${fmt(first.n)} (N x${(x.n / first.n).toFixed(0)})`,
    )
    .join('; ');
  return [`Peak RSS of the restore process against the smallest size (${fmt(first.n)}: ${first.cniRssMiB.toFixed(0)} MiB): ${growth}.`, ''];
}

function writeSection(r: {
  rows: Row[];
  sizes: number[];
  concurrency: number;
  started: Date;
  loadStart: number;
  serverVersion: string;
  kubectlVersion: string;
}): void {
  const { rows } = r;
  const ran = rows.map((x) => x.n);
  const notRun = r.sizes.filter((n) => !ran.includes(n));
  const perObj = (s: number, n: number) => `${((s / n) * 1000).toFixed(2)}`;
  const section = [
    '## Restore',
    '',
    benchHeader('bench/restore.ts', `node dist/bench/restore.js --sizes ${r.sizes.join(',')} --concurrency ${r.concurrency}`, [
      `kube-apiserver ${r.serverVersion}`,
      `kubectl ${r.kubectlVersion}`,
    ]) +
      ` Started ${r.started.toISOString().slice(0, 16).replace('T', ' ')} UTC at 1-minute load average ${r.loadStart.toFixed(1)}; local control plane (kube-apiserver and etcd on 127.0.0.1). ` +
      (notRun.length ? `Sizes asked for but not (yet) run when this was written: ${notRun.map(fmt).join(', ')}. ` : '') +
      "N IPAM handles, each the owner of one allocated address in the IPAMBlocks (N / 64 of them, /26) that stay in the cluster, are lost as in the incident (their CRD deleted), then brought back by cni-rewind's restore engine " +
      '(`restore --resources --kinds IPAMHandle`, in a process of its own, `bench/restore-worker.ts`: re-creates the CRD from the bundle, reads and checks the bundle, plans, creates each object with strict field validation, re-reads for drift) ' +
      'and by `kubectl apply --server-side -f` of the same objects in one file (with the empty CRD put back first), one after the other in the same run. Both must end with exactly N handles or the script fails. ' +
      "Times are wall clock of each process (Node or kubectl start-up included); peak RSS is GNU time's maximum resident set size of the restore process. " +
      "HTTP 429s: cni-rewind's from `KubeClient.stats.throttled`, kubectl's from its `-v=6` response log; requests counted the same way. " +
      'Set-up, not measured: the N handles are put into etcd directly and removed from etcd before each CRD deletion (`bench/etcd.ts`), which takes seconds where the API server takes minutes per 100k objects; the bundle is a real `export` of them.',
    '',
    '| IPAM handles | cni-rewind restore | kubectl apply --server-side | kubectl / cni-rewind | peak RSS cni-rewind | ms/object cni-rewind | ms/object kubectl | HTTP 429 cni-rewind | HTTP 429 kubectl | requests cni-rewind | requests kubectl |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map(
      (x) =>
        `| ${fmt(x.n)} | ${x.cni.toFixed(1)} s | ${x.kubectl.toFixed(1)} s | ${(x.kubectl / x.cni).toFixed(2)}x | ${x.cniRssMiB.toFixed(0)} MiB | ${perObj(x.cni, x.n)} | ${perObj(x.kubectl, x.n)} | ${x.cniThrottled} | ${x.kubectl429} | ${fmt(x.cniRequests)} | ${fmt(x.kubectlRequests)} |`,
    ),
    '',
    ...rssFlatness(rows),
    "The API server's floor in the same run (after both restores): bare creates of fresh handles (POST, strict field validation, nothing else), one at a time and " +
      `${r.concurrency} at a time. When more in flight is no faster per object, the API server and etcd are the bottleneck and set the pace of any restore; ` +
      "kubectl's ms/object over the floor is then the largest ratio any client could reach on this machine at that moment:",
    '',
    `| IPAM handles | bare creates | ms/object, 1 in flight | ms/object, ${r.concurrency} in flight | kubectl ms/object / floor (largest reachable ratio) | cni-rewind ms/object / floor |`,
    '|---:|---:|---:|---:|---:|---:|',
    ...rows.map((x) => {
      const fl = Math.min(x.floor.one, x.floor.many);
      return `| ${fmt(x.n)} | ${fmt(x.floor.objects)} | ${x.floor.one.toFixed(2)} | ${x.floor.many.toFixed(2)} | ${(((x.kubectl / x.n) * 1000) / fl).toFixed(2)}x | ${(((x.cni / x.n) * 1000) / fl).toFixed(2)}x |`;
    }),
    '',
    "Where cni-rewind's time goes (`RestoreResult.timings`, shown by `restore -v` and in `-o json`; wall time per phase):",
    '',
    `| IPAM handles | ${PHASES.map(([, l]) => l).join(' | ')} | total |`,
    `|---:|${PHASES.map(() => '---:').join('|')}|---:|`,
    ...rows.map((x) => `| ${fmt(x.n)} | ${PHASES.map(([k]) => sec(x.timings[k])).join(' | ')} | ${sec(x.timings.total)} |`),
    '',
    ...(rows.length > 1
      ? [
          'How each cost grows with N (time at the larger size / time at the smaller; linear growth would equal the N factor):',
          '',
          ...rows.slice(1).map((x, i) => {
            const a = rows[i]!;
            const f = (p: number, q: number) => `x${(q > 0 ? p / q : 0).toFixed(1)}`;
            const phases = PHASES.filter(([k]) => (a.timings[k] ?? 0) >= 100).map(([k, l]) => `${l} ${f(x.timings[k] ?? 0, a.timings[k] ?? 0)}`);
            return `- ${fmt(a.n)} -> ${fmt(x.n)} (N x${(x.n / a.n).toFixed(1)}): cni-rewind ${f(x.cni, a.cni)}, kubectl ${f(x.kubectl, a.kubectl)}; cni-rewind phases over 0.1 s: ${phases.join(', ') || 'none'}`;
          }),
          '',
        ]
      : []),
    "Phases: *read bundle* reads, checksums and parses every bundle file; *read cluster* is the plan's cluster reads (identity, CRDs, discovery, operator, one paged list per custom resource type that exists); " +
      "*schema check* checks each object against its CRD's schema; *plan* compares and orders; *create CRD + Established* re-creates the lost CRD from the bundle and waits until it serves; " +
      '*operator pause / datastore lock* scales the operator to 0 and back and sets ClusterInformation datastoreReady=false and back (where the cluster has them); ' +
      '*write* is one POST per object (strict field validation), 16 at a time; *drift check* reads the written objects back, one paged list of 1000 objects per request (src/restore/drift.ts LIST_READBACK_PAGE). ' +
      "Fairness: kubectl's time starts with the empty CRD already put back and does no read-back; cni-rewind's includes re-creating the CRD, checking the bundle and the read-back.",
    '',
    '',
  ].join('\n');
  replaceBenchmarkSection('Restore', section);
  process.stdout.write(section + '\n');
}

main().catch((err) => {
  process.stderr.write(`bench/restore: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
