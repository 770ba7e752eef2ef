/**
 * Fault tests for `apply PLAN`: kube-apiserver SIGKILLed in the middle of a step that writes (the
 * in-place downgrade Calico 3.28.1 -> 3.27.4 with the real release manifests and a population, as in
 * plan-apply.test.ts) and restarted:
 *   - within the retry budget: apply completes (exit 0) and the end state equals the fault-free run;
 *   - down longer than the budget (CNI_REWIND_KUBE_RETRY_MS): apply stops with exit 3 (a step failed, see
 *     docs/strategies.md), naming the step and the call, the journal records the failure, the printed --resume
 *     command is the real one; the lock it could not give back is stale and `apply PLAN --resume` after the restart
 *     takes it over and ends in the same state as the fault-free run.
 * The kill is triggered by the journal next to the bundle: as soon as the step-start record of the chosen step is
 * fsync'd, the API server is killed (the step is then in flight: its first call is under way or about to be).
 * The tigera operator does not run here (kwok only marks its pod Ready): the faults are the API server's and the
 * journal's, and a real operator would only add its own reconnects to judge; apply on the real operators, killed after
 * every step and resumed, is plan-apply.test.ts. The population's allocations have their running Pod objects
 * (podsForPopulation), and every apply ends with each pod's address still held in IPAM by that pod
 * (expectPodAddressesHeld): an apply that dies half-way must not free an address a running pod has.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Journal, journalPathFor } from '../../src/apply/journal.js';
import { LOCK_NAME, LOCK_NAMESPACE } from '../../src/apply/lock.js';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { releasesDir } from '../support/releases.js';
import { deleteNodes, resetCalico, runCli, startCli, testClient } from './helpers.js';
import { calicoSnapshot, expectDowngradedTo327, installCalico328, snapshotDifferences, type CalicoSnapshot } from './plan-support.js';
import { populateCalico, type Population } from './population.js';
import { podsForPopulation, populationPods } from './population-pods.js';
import { expectPodAddressesHeld } from './pod-ip-support.js';
import { until } from '../support/until.js';

const fixtures = releasesDir();
const STEPS = ['preflight', 'pause-operator', 'apply-crds', 'apply-operator', 'transform-installation', 'resume-operator', 'wait-rollout', 'verify-data'];
const noStack = (s: string) => expect(s).not.toMatch(/\n\s+at .+[(:]\d+|unexpected error/);

const stepRecords = (journal: string, event: string, step: string) =>
  Journal.read(journal).records.filter((r: any) => r.event === event && r.step === step) as any[];

describe('faults: kube-apiserver stopped and restarted during apply (3.28.1 -> 3.27.4)', () => {
  let client: KubeClient;
  let dir: string;
  let population: Population;
  let faultFree: CalicoSnapshot | undefined;
  const cluster = new LocalCluster({ name: process.env.CNI_REWIND_CLUSTER_NAME ?? 'e2e' });

  async function ensureApiserver(): Promise<void> {
    const ok = await client.serverVersion().then(
      () => true,
      () => false,
    );
    if (!ok) await cluster.startApiserver();
  }

  async function exportAndPlan(name: string): Promise<{ bundle: string; plan: string; out: any; journal: string }> {
    const bundle = path.join(dir, `bundle-${name}`);
    const e = await runCli(['export', '--out', bundle]);
    expect(e.code, e.stderr).toBe(0);
    const plan = path.join(dir, `plan-${name}.yaml`);
    const p = await runCli(['plan', '--to', '3.27.4', '--manifests', fixtures, '--bundle', bundle, '--no-disk-snapshots', '--out', plan, '-o', 'json']);
    expect(p.code, p.stderr).toBe(0);
    const out = JSON.parse(p.stdout);
    expect(out.steps.map((s: any) => s.id)).toEqual(STEPS);
    return { bundle, plan, out, journal: journalPathFor(bundle, out.id) };
  }

  beforeAll(async () => {
    expect(await cluster.isUp(), `cluster ${cluster.name} must be running (global setup)`).toBe(true);
    client = await testClient();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-faults-apply-'));
    await resetCalico(client);
    await client.delete(K.lease, LOCK_NAMESPACE, LOCK_NAME);
    await deleteNodes(client, 'fap-');
    await createFakeNodes(client, [{ name: 'fap-1' }, { name: 'fap-2' }]);
    await installCalico328(client);
    population = await populateCalico(client, { prefix: 'fap', nodes: ['fap-1', 'fap-2'] });
    await installCalico328(client);
    // The pods behind the population's allocations, running with those addresses, as the CNI plugin leaves them.
    expect(populationPods(population).length, 'pods with Calico addresses').toBeGreaterThan(0);
    await podsForPopulation(client, population);
    await expectPodAddressesHeld(client, populationPods(population).length);
  });
  afterAll(async () => {
    await ensureApiserver().catch(() => undefined);
    if (population) await client?.delete(K.namespace, undefined, population.namespace).catch(() => undefined);
    await deleteNodes(client, 'fap-').catch(() => undefined);
    client?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('reference: the fault-free apply', async () => {
    const before = await calicoSnapshot(client);
    const { plan } = await exportAndPlan('reference');
    const t0 = Date.now();
    const r = await runCli(['apply', plan, '--yes', '-o', 'json']);
    expect(r.code, r.stderr + r.stdout).toBe(0);
    console.log(
      `fault-free apply: ${((Date.now() - t0) / 1000).toFixed(1)} s; ${JSON.parse(r.stdout)
        .steps.map((s: any) => `${s.id} ${(s.ms / 1000).toFixed(1)}s`)
        .join(', ')}`,
    );
    faultFree = await expectDowngradedTo327(client, population, before);
    await expectPodAddressesHeld(client, populationPods(population).length);
  });

  it('API server killed as apply-crds starts and restarted ~3 s later: apply retries, completes (exit 0), end state equals the fault-free run', async () => {
    expect(faultFree, 'needs the fault-free reference run').toBeDefined();
    await installCalico328(client);
    const before = await calicoSnapshot(client);
    const { plan, journal } = await exportAndPlan('restart');
    const t0 = Date.now();
    const run = startCli(['apply', plan, '--yes', '-v', '-o', 'json'], { CNI_REWIND_KUBE_RETRY_MS: '180000' });
    let downAt: number;
    let upAt: number;
    try {
      await until('apply-crds to start (journal)', () => run.exited() || stepRecords(journal, 'step-start', 'apply-crds').length > 0, {
        timeoutMs: 240_000,
        intervalMs: 20,
        state: () => `apply exited: ${run.exited()}; journal ends: ${JSON.stringify(Journal.read(journal).records.slice(-3))}`,
      });
      expect(run.exited(), 'apply ended before apply-crds started').toBe(false);
      await cluster.stopApiserver();
      downAt = Date.now();
      // The step was still in flight when the API server went away.
      expect(stepRecords(journal, 'step-end', 'apply-crds')).toEqual([]);
      await new Promise((r) => setTimeout(r, 3000));
    } finally {
      await cluster.startApiserver();
      upAt = Date.now();
    }
    const r = await run.done;
    console.log(
      `apply under restart: API server down ${((upAt - downAt) / 1000).toFixed(1)} s (3 s + restart until /readyz); apply took ${((Date.now() - t0) / 1000).toFixed(1)} s; exit ${r.code}; ${(r.stderr.match(/retrying/g) ?? []).length} retries logged`,
    );
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    expect(r.stderr, 'the client retried while the API server was down').toMatch(/retrying .* in \d+ ms/);
    const res = JSON.parse(r.stdout);
    console.log(`  steps: ${res.steps.map((s: any) => `${s.id} ${(s.ms / 1000).toFixed(1)}s`).join(', ')}`);
    expect(res.ok).toBe(true);
    expect(res.steps.map((s: any) => s.status)).toEqual(STEPS.map(() => 'done'));
    // The journal: every step started and ended once; apply-crds ended after the API server came back.
    const j = Journal.read(journal);
    expect(j.done).toBe(true);
    expect(j.records.filter((x) => x.event === 'step-start').map((x: any) => x.step)).toEqual(STEPS);
    expect(Date.parse(stepRecords(journal, 'step-end', 'apply-crds')[0].time)).toBeGreaterThan(downAt);
    const after = await expectDowngradedTo327(client, population, before);
    expect(snapshotDifferences(after, faultFree!).join('\n')).toBe('');
    await expectPodAddressesHeld(client, populationPods(population).length);
  });

  it('API server down longer than the retry budget during apply-crds: exit 3 naming the step and call; --resume after the restart takes over its own stale lock and ends like the fault-free run', async () => {
    expect(faultFree, 'needs the fault-free reference run').toBeDefined();
    await installCalico328(client);
    const before = await calicoSnapshot(client);
    const { plan, journal, out } = await exportAndPlan('outage');
    const t0 = Date.now();
    const run = startCli(['apply', plan, '--yes'], { CNI_REWIND_KUBE_RETRY_MS: '3000' });
    let r: Awaited<typeof run.done>;
    let downAt: number;
    let upAt: number;
    let exitAt: number;
    try {
      await until('apply-crds to start (journal)', () => run.exited() || stepRecords(journal, 'step-start', 'apply-crds').length > 0, {
        timeoutMs: 240_000,
        intervalMs: 20,
        state: () => `apply exited: ${run.exited()}; journal ends: ${JSON.stringify(Journal.read(journal).records.slice(-3))}`,
      });
      expect(run.exited(), 'apply ended before apply-crds started').toBe(false);
      await cluster.stopApiserver();
      downAt = Date.now();
      r = await run.done;
      exitAt = Date.now();
    } finally {
      await cluster.startApiserver();
      upAt = Date.now();
    }
    console.log(
      `apply over budget (3 s per call): exit ${r.code} ${((exitAt - t0) / 1000).toFixed(1)} s after start, ${((exitAt - downAt) / 1000).toFixed(1)} s after the kill; API server down ${((upAt - downAt) / 1000).toFixed(1)} s in all (incl. restart)`,
    );
    expect(r.code, r.stdout + r.stderr).toBe(3);
    noStack(r.stdout + r.stderr);
    // One error line on stderr naming the step and the call that could not be made.
    const errors = r.stderr.split('\n').filter((l) => /^(error: |cni-rewind: )/.test(l));
    expect(errors, r.stderr).toHaveLength(1);
    console.log(`the error line: ${errors[0]}`);
    expect(errors[0]).toMatch(/^error: \[3\/8\] .* failed: cannot reach the Kubernetes API server \(\w+\) on (GET|PUT|POST) \/\S+/);
    // stdout: the state, the step and the exact command to continue.
    expect(r.stdout).toMatch(/apply-crds\s+failed\s/);
    expect(r.stdout).toMatch(/preflight\s+done/);
    expect(r.stdout).toMatch(/apply-operator\s+not-run/);
    expect(r.stdout).toContain(`plan ${out.id} stopped at step apply-crds: cannot reach the Kubernetes API server`);
    expect(r.stdout).toContain(`cni-rewind apply ${plan} --resume`);
    expect(r.stdout).toContain(`journal ${journal}`);
    // The journal: two steps finished, apply-crds started and failed, nothing after it.
    const j = Journal.read(journal);
    expect([...j.finished]).toEqual(['preflight', 'pause-operator']);
    expect(j.unfinished).toEqual(['apply-crds']);
    expect(j.lastFailure?.step).toBe('apply-crds');
    expect(j.done).toBe(false);
    // The operator stays paused (0 replicas) and the count to go back to is in the journal.
    expect((await client.get(K.deployment, 'tigera-operator', 'tigera-operator')).spec.replicas).toBe(0);
    expect(j.remembered.operatorReplicas).toBe(1);
    // The lock could not be given back while the API server was down: it still names the dead process.
    const lease = await client.get(K.lease, LOCK_NAMESPACE, LOCK_NAME);
    expect(lease.spec.holderIdentity).toMatch(new RegExp(`/${run.child.pid}/${out.id}$`));

    // Without --resume the started plan is refused; --resume takes over its own stale lock.
    const other = await runCli(['apply', plan, '--yes']);
    expect(other.code, 'without --resume the started plan is refused').toBe(5);
    const t1 = Date.now();
    const resumed = await runCli(['apply', plan, '--yes', '--resume', '-o', 'json']);
    console.log(`apply --resume after the outage: ${((Date.now() - t1) / 1000).toFixed(1)} s; exit ${resumed.code}`);
    expect(resumed.code, resumed.stderr.slice(-3000)).toBe(0);
    expect(resumed.stderr).toMatch(new RegExp(`took over the apply lock from .*/${run.child.pid}/${out.id} \\(stale\\)`));
    expect(resumed.stderr).toMatch(/\(again: it was interrupted\)/);
    const res = JSON.parse(resumed.stdout);
    console.log(`  steps: ${res.steps.map((s: any) => `${s.id} ${s.ms === undefined ? s.status : `${(s.ms / 1000).toFixed(1)}s`}`).join(', ')}`);
    expect(res.resumed).toBe(true);
    expect(res.steps.map((s: any) => s.status)).toEqual(['skipped', 'skipped', 'done', 'done', 'done', 'done', 'done', 'done']);
    expect(res.tookOverLock).toMatchObject({ pid: run.child.pid, planId: out.id, stale: true });
    // Each step started once, except apply-crds: once in the failed run, once in the resume.
    const starts = Journal.read(journal)
      .records.filter((x) => x.event === 'step-start')
      .map((x: any) => x.step);
    expect(starts).toEqual(['preflight', 'pause-operator', 'apply-crds', ...STEPS.slice(2)]);
    expect(Journal.read(journal).done).toBe(true);
    const after = await expectDowngradedTo327(client, population, before);
    expect(snapshotDifferences(after, faultFree!).join('\n')).toBe('');
    await expectPodAddressesHeld(client, populationPods(population).length);
  });
});
