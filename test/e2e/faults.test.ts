/**
 * Fault tests: the end state equals the fault-free run, or the command fails with one clear line and
 * nothing is lost (no bundle that `verify` accepts when it is incomplete, no half-restored state left unreported).
 *   - kube-apiserver SIGKILLed and restarted during export and during restore (the client retries with backoff);
 *   - kube-apiserver down for longer than the retry budget (CNI_REWIND_KUBE_RETRY_MS): exit 4, nothing accepted;
 *   - disk full while writing a bundle (a 2 MiB tmpfs), directory and .tar.gz targets.
 * This test process holds its own LocalCluster handle for the running instance (same name and port base as the
 * global setup) to stop and start only its API server. The slow fault cases are grouped here.
 * The population's allocations have their running Pod objects (podsForPopulation): the restore under an API server
 * restart must leave every pod's address held in IPAM by that pod (expectPodAddressesHeld).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { crdResourceType } from '../../src/kube/discovery.js';
import { resourceKey } from '../../src/kube/types.js';
import { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { applyFixture, calicoType, deleteNodes, runCli, startCli, testClient } from './helpers.js';
import { populateCalico, type Population } from './population.js';
import { podsForPopulation, populationPods } from './population-pods.js';
import { expectPodAddressesHeld } from './pod-ip-support.js';
import { until } from '../support/until.js';

const CALICO_GROUPS = ['crd.projectcalico.org', 'operator.tigera.io', 'policy.networking.k8s.io'];
const HANDLES = calicoType('ipamhandles', 'IPAMHandle');
const noStack = (s: string) => expect(s).not.toMatch(/\n\s+at .+[(:]\d+|unexpected error/);
/** The error part of stderr (progress lines may come first): the one `cni-rewind:` line and what follows it. */
function errorLines(stderr: string): string[] {
  const lines = stderr.trim().split('\n');
  const at = lines.findIndex((l) => l.startsWith('cni-rewind: '));
  expect(at, stderr).toBeGreaterThanOrEqual(0);
  expect(lines.filter((l) => l.startsWith('cni-rewind: ')).length, stderr).toBe(1);
  return lines.slice(at);
}

/** A partial bundle directory under `dir` is writing IPAM handles (the export is in its longest phase). */
const writingHandles = (dir: string) => () =>
  fs
    .readdirSync(dir)
    .some(
      (f) =>
        f.includes('.partial-') &&
        ['IPAMHandle/_cluster', 'IPAMHandle.jsonl'].some((h) => fs.existsSync(path.join(dir, f, 'resources/crd.projectcalico.org', h))),
    );

describe('faults: API server restarts and a full disk', () => {
  let client: KubeClient;
  let work: string;
  const cluster = new LocalCluster({ name: process.env.CNI_REWIND_CLUSTER_NAME ?? 'e2e' });
  let liveCounts: Record<string, number>;
  let population: Population | undefined;

  /** Object counts of every Calico CRD, read independently of the tool. */
  async function countLive(): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const crd of (await client.listAll(K.crd)).filter((c) => CALICO_GROUPS.includes(c.spec.group))) {
      const t = crdResourceType(crd);
      out[resourceKey(t)] = (await client.listAll(t)).length;
    }
    return out;
  }

  /** The API server is back (restart it if a test left it down). */
  async function ensureApiserver(): Promise<void> {
    const ok = await client.serverVersion().then(
      () => true,
      () => false,
    );
    if (!ok) await cluster.startApiserver();
  }

  beforeAll(async () => {
    expect(await cluster.isUp(), `cluster ${cluster.name} must be running (global setup)`).toBe(true);
    client = await testClient();
    await applyFixture(client, '3.28.1', 'tigera-operator.yaml');
    // Enough objects that an export or a restore is still running a few seconds after it starts.
    await deleteNodes(client, 'flt-');
    await createFakeNodes(client, [{ name: 'flt-node-1' }]);
    population = await populateCalico(client, { prefix: 'flt', nodes: ['flt-node-1'], extraHandles: 3000, customResources: false });
    // The pods behind the population's allocations, running with those addresses, as the CNI plugin leaves them.
    expect(populationPods(population).length, 'pods with Calico addresses').toBeGreaterThan(0);
    await podsForPopulation(client, population);
    await expectPodAddressesHeld(client, populationPods(population).length);
    liveCounts = await countLive();
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-faults-'));
  });
  afterAll(async () => {
    await ensureApiserver().catch(() => undefined);
    if (population) await client?.delete(K.namespace, undefined, population.namespace).catch(() => undefined);
    await deleteNodes(client, 'flt-').catch(() => undefined);
    client?.close();
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  it('export: API server killed and restarted mid-export; the export retries, completes, verifies and counts every object', async () => {
    const dir = fs.mkdtempSync(path.join(work, 'exp-restart-'));
    const out = path.join(dir, 'b');
    const run = startCli(['export', '--out', out, '-v'], { CNI_REWIND_KUBE_RETRY_MS: '120000' });
    await until('export writing IPAM handles', writingHandles(dir));
    await cluster.stopApiserver();
    const downAt = Date.now();
    await new Promise((r) => setTimeout(r, 3000));
    await cluster.startApiserver();
    const r = await run.done;
    console.log(`API server down ${((Date.now() - downAt) / 1000).toFixed(1)} s (incl. restart); export exit ${r.code}`);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr, 'the client retried while the API server was down').toMatch(/retrying .* in \d+ ms/);
    const v = await runCli(['verify', out, '-o', 'json']);
    expect(v.code, v.stdout + v.stderr).toBe(0);
    const ins = await runCli(['inspect', out, '-o', 'json']);
    expect(ins.code, ins.stderr).toBe(0);
    const m = JSON.parse(ins.stdout);
    for (const [k, n] of Object.entries(liveCounts)) expect(m.counts[k] ?? 0, k).toBe(n);
    expect(m.counts['ipamhandles.crd.projectcalico.org']).toBeGreaterThanOrEqual(3000);
    const d = await runCli(['diff', out]);
    expect(d.code, d.stdout.slice(0, 2000) + d.stderr).toBe(0);
    expect(fs.readdirSync(dir)).toEqual(['b']);
  });

  it('export: API server down longer than the retry budget: exit 4 naming the call, no bundle verify accepts', async () => {
    const dir = fs.mkdtempSync(path.join(work, 'exp-down-'));
    const out = path.join(dir, 'b');
    const run = startCli(['export', '--out', out], { CNI_REWIND_KUBE_RETRY_MS: '3000' });
    try {
      await until('export writing IPAM handles', writingHandles(dir));
      await cluster.stopApiserver();
      const r = await run.done;
      expect(r.code, r.stderr).toBe(4);
      const lines = errorLines(r.stderr);
      expect(lines[0]).toMatch(/^cni-rewind: cannot reach the Kubernetes API server \(\w+\) on GET \/\S+/);
      expect(lines.length, r.stderr).toBeLessThanOrEqual(2);
      noStack(r.stderr);
      expect(fs.existsSync(out)).toBe(false);
      expect(fs.readdirSync(dir), 'the partial directory is removed on failure').toEqual([]);
    } finally {
      await cluster.startApiserver();
    }
    const l = JSON.parse((await runCli(['list', dir, '-o', 'json'])).stdout);
    expect(l).toEqual([]);
  });

  it('export: killed with SIGKILL while the API server is down: what is left is never accepted', async () => {
    const dir = fs.mkdtempSync(path.join(work, 'exp-kill-'));
    const out = path.join(dir, 'b');
    const run = startCli(['export', '--out', out], { CNI_REWIND_KUBE_RETRY_MS: '120000' });
    try {
      await until('export writing IPAM handles', writingHandles(dir));
      await cluster.stopApiserver();
      await new Promise((r) => setTimeout(r, 1000)); // the export is now retrying
      run.child.kill('SIGKILL');
      await run.done;
    } finally {
      await cluster.startApiserver();
    }
    expect(fs.existsSync(out)).toBe(false);
    const left = fs.readdirSync(dir);
    expect(left.length).toBe(1); // the hidden partial directory SIGKILL could not remove
    for (const f of left) {
      const v = await runCli(['verify', path.join(dir, f)]);
      expect(v.code).toBe(2);
      expect(v.stderr).toMatch(/not a bundle: it has no manifest\.json/);
    }
    expect(JSON.parse((await runCli(['list', dir, '-o', 'json'])).stdout)).toEqual([]);
  });

  it('restore: API server killed and restarted while the IPAM handles are re-created; the restore completes and diff is clean', async () => {
    const bundle = path.join(work, 'restore-src');
    const e = await runCli(['export', '--out', bundle]);
    expect(e.code, e.stderr).toBe(0);
    // Lose every IPAM handle the way the incident lost everything: delete the CRD (its objects go with it).
    await client.delete(K.crd, undefined, 'ipamhandles.crd.projectcalico.org');
    await client.waitFor(
      'ipamhandles CRD gone',
      async () => ((await client.getOrUndefined(K.crd, undefined, 'ipamhandles.crd.projectcalico.org')) ? undefined : true),
      { timeoutMs: 120_000 },
    );

    const run = startCli(['restore', bundle, '--resources', '--yes', '-v'], { CNI_REWIND_KUBE_RETRY_MS: '120000' });
    // Wait until handles are being created, then kill the API server.
    await until(
      'restore creating IPAM handles',
      async () => {
        try {
          for await (const page of client.listPages(HANDLES, { limit: 200 })) return (page as unknown as { items: unknown[] }).items.length >= 200;
          return false;
        } catch {
          return false;
        }
      },
      { timeoutMs: 180_000, state: () => `restore so far:\n${run.stderr().split('\n').slice(-10).join('\n')}` },
    );
    await cluster.stopApiserver();
    await new Promise((r) => setTimeout(r, 3000));
    await cluster.startApiserver();
    const r = await run.done;
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    expect(r.stderr, 'the client retried while the API server was down').toMatch(/retrying .* in \d+ ms/);
    expect(await countLive()).toEqual(liveCounts);
    const d = await runCli(['diff', bundle]);
    expect(d.code, d.stdout.slice(0, 2000) + d.stderr).toBe(0);
    await expectPodAddressesHeld(client, populationPods(population!).length);
  });

  describe('disk full (2 MiB tmpfs)', () => {
    let mnt: string;
    beforeAll(() => {
      mnt = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-full-'));
      const m = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=2m,mode=0755', 'tmpfs', mnt], { encoding: 'utf8' });
      if (m.status !== 0) throw new Error(`cannot mount a tmpfs at ${mnt} (needs root): ${m.stderr}`);
    });
    afterAll(() => {
      if (!mnt) return;
      spawnSync('umount', [mnt]);
      fs.rmSync(mnt, { recursive: true, force: true });
    });

    for (const target of ['b', 'b.tar.gz']) {
      it(`export --out ${target} on a full disk: exit 4 with one clear line, nothing left behind, nothing accepted`, async () => {
        const out = path.join(mnt, target);
        const r = await runCli(['export', '--out', out]);
        expect(r.code, r.stderr).toBe(4);
        const lines = errorLines(r.stderr);
        expect(lines[0]).toMatch(/^cni-rewind: .*no space left on device/i);
        expect(lines.length, r.stderr).toBeLessThanOrEqual(2);
        noStack(r.stderr);
        expect(fs.readdirSync(mnt), 'no partial bundle left on the full disk').toEqual([]);
        const v = await runCli(['verify', out]);
        expect(v.code).toBe(2);
        // The disk is usable again: nothing was leaked.
        const df = spawnSync('df', ['--output=used', '-B1', mnt], { encoding: 'utf8' }).stdout.trim().split('\n').pop()!.trim();
        expect(Number(df)).toBeLessThan(64 * 1024);
      });
    }
  });
});
