/**
 * The apply lock lost mid-run: while `apply` runs the in-place downgrade 3.28.1 -> 3.27.4 on the real
 * control plane, another party takes its Lease (the test overwrites it, as a run on another host that judged it stale
 * would). apply must stop at the next safe point, before the next step, with exit 4 and a line saying so, leave the
 * other holder's Lease alone, and record in the journal where to resume; `--resume` is refused while the other
 * holder is live and completes with `--break-lock`, skipping the steps already done.
 * The tigera operator does not run here (kwok only marks its pod Ready): what is tested is the Lease and the journal;
 * apply under the real operators, lock refusals included, is plan-apply.test.ts.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Journal, journalPathFor } from '../../src/apply/journal.js';
import { LOCK_NAME, LOCK_NAMESPACE } from '../../src/apply/lock.js';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { releasesDir } from '../support/releases.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { deleteNodes, resetCalico, runCli, startCli, testClient } from './helpers.js';
import { installCalico328 } from './plan-support.js';
import { until } from '../support/until.js';

const STEPS = ['preflight', 'pause-operator', 'apply-crds', 'apply-operator', 'transform-installation', 'resume-operator', 'wait-rollout', 'verify-data'];
const OTHER = 'other-host/4242/plan-other';
const micro = (d = new Date()) => d.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');

describe('apply: the lock taken by someone else mid-run', () => {
  let client: KubeClient;
  let dir: string;

  beforeAll(async () => {
    client = await testClient();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-apply-lock-'));
    await resetCalico(client);
    await client.delete(K.lease, LOCK_NAMESPACE, LOCK_NAME);
    await deleteNodes(client, 'alk-');
    await createFakeNodes(client, [{ name: 'alk-1' }, { name: 'alk-2' }]); // kwok runs the operator's pod on them
    await installCalico328(client);
  });
  afterAll(async () => {
    await client?.delete(K.lease, LOCK_NAMESPACE, LOCK_NAME).catch(() => undefined);
    if (client) await deleteNodes(client, 'alk-').catch(() => undefined);
    client?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('stops before the next step with exit 4, the journal says where to resume; --resume --break-lock completes', async () => {
    const bundle = path.join(dir, 'bundle');
    const e = await runCli(['export', '--out', bundle]);
    expect(e.code, e.stderr).toBe(0);
    const plan = path.join(dir, 'plan.yaml');
    const p = await runCli(['plan', '--to', '3.27.4', '--manifests', releasesDir(), '--bundle', bundle, '--no-disk-snapshots', '--out', plan, '-o', 'json']);
    expect(p.code, p.stderr).toBe(0);
    const planOut = JSON.parse(p.stdout);
    expect(planOut.steps.map((s: any) => s.id)).toEqual(STEPS);
    const journal = journalPathFor(bundle, planOut.id);

    const run = startCli(['apply', plan, '--yes']);
    await until(
      'apply-crds to start (journal)',
      () => run.exited() || Journal.read(journal).records.some((r: any) => r.event === 'step-start' && r.step === 'apply-crds'),
      { timeoutMs: 240_000, intervalMs: 20, state: () => `journal ends: ${JSON.stringify(Journal.read(journal).records.slice(-3))}` },
    );
    expect(run.exited(), 'apply ended before apply-crds started').toBe(false);
    const lease = await client.get(K.lease, LOCK_NAMESPACE, LOCK_NAME);
    expect(lease.spec.holderIdentity).toContain(planOut.id);
    await client.replace(K.lease, { ...lease, spec: { holderIdentity: OTHER, leaseDurationSeconds: 60, acquireTime: micro(), renewTime: micro() } });
    // Every step apply starts from now on would have seen the new holder first: the first one not started yet is
    // where it must stop.
    const started = Journal.read(journal)
      .records.filter((r: any) => r.event === 'step-start')
      .map((r: any) => r.step);
    const next = STEPS[started.length]!;

    const r = await run.done;
    expect(r.code, r.stderr + r.stdout).toBe(4);
    expect(r.stderr).toContain(`the apply lock was lost (the lease is now held by ${OTHER})`);
    expect(r.stdout).toContain(`stopped before step ${next}`);
    expect(r.stdout).toContain(`cni-rewind apply ${plan} --resume`);
    expect(r.stderr).not.toMatch(/\n\s+at .+[(:]\d+/);
    const j = Journal.read(journal);
    expect(j.records.filter((x: any) => x.event === 'step-start').map((x: any) => x.step)).toEqual(started);
    expect(j.unfinished).toEqual([]);
    expect(j.records.at(-1)).toMatchObject({ event: 'stopped', step: next, index: STEPS.indexOf(next) + 1 });
    // apply neither renewed nor released the other holder's lease.
    expect((await client.get(K.lease, LOCK_NAMESPACE, LOCK_NAME)).spec.holderIdentity).toBe(OTHER);

    const refused = await runCli(['apply', plan, '--yes', '--resume']);
    expect(refused.code, refused.stderr).toBe(5);
    expect(refused.stderr).toContain(`lock held by ${OTHER}`);
    const resumed = await runCli(['apply', plan, '--yes', '--resume', '--break-lock', '-o', 'json']);
    expect(resumed.code, resumed.stderr + resumed.stdout).toBe(0);
    const out = JSON.parse(resumed.stdout);
    expect(out.steps.map((s: any) => s.status)).toEqual(STEPS.map((s) => (started.includes(s) ? 'skipped' : 'done')));
  });
});
