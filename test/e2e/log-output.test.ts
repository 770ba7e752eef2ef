/**
 * `apply` and `restore` as a CI log or `| tee` sees them: the real CLI with stdout and stderr piped (not a terminal).
 * A log has no progress-bar lines ("preflight 0/1 0% running"), and says each thing once: one line when a step starts,
 * one with its result, and a note that ten objects share is one line with their count (-v lists them). Calico 3.28.1
 * is installed as its manifests say but its programs do not run (kwok marks the operator's pod Ready): the output
 * paths are the same with them, and the downgrade to 3.27.4 completes without them (apply-lock.test.ts).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCK_NAME, LOCK_NAMESPACE } from '../../src/apply/lock.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject } from '../../src/kube/types.js';
import { releasesDir } from '../support/releases.js';
import { calicoType, deleteNodes, explain, operatorType, resetCalico, runCli, testClient, type CliResult } from './helpers.js';
import { installCalico328 } from './plan-support.js';

const GNS = calicoType('globalnetworksets', 'GlobalNetworkSet');
const INSTALLATION = operatorType('installations', 'Installation');
/** A progress bar's text as a terminal shows it ("preflight 0/1 0% running", "CRDs 3/23 13%"). */
const BAR_LINE = /\d+\/\d+ \d+%/;
const OWNED = 10;

/** The lines a log would keep, from both streams (the order between the two is not kept: each is judged alone). */
const logLines = (r: CliResult) => [...r.stderr.split('\n'), ...r.stdout.split('\n')].map((l) => l.trimEnd()).filter((l) => l.trim() !== '');

/** Every line said more than once, with its count: a warning while running and the same text as a note at the end count as one. */
function repeated(lines: string[]): string[] {
  const seen = new Map<string, number>();
  for (const line of lines) {
    const l = line.replace(/^(warning|note|error): /, '');
    seen.set(l, (seen.get(l) ?? 0) + 1);
  }
  return [...seen].filter(([, n]) => n > 1).map(([l, n]) => `${n}x ${l}`);
}

function expectLogLike(r: CliResult): void {
  const lines = logLines(r);
  expect(
    lines.filter((l) => BAR_LINE.test(l) || /\brunning$/.test(l)),
    `progress-bar lines in a log:\n${r.stderr}`,
  ).toEqual([]);
  expect(repeated(lines), `lines printed more than once:\n${r.stderr}\n${r.stdout}`).toEqual([]);
}

describe('apply and restore output in a log (stdout and stderr piped)', () => {
  let client: KubeClient;
  let dir: string;

  beforeAll(async () => {
    client = await testClient();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-log-output-'));
    await resetCalico(client);
    await client.delete(K.lease, LOCK_NAMESPACE, LOCK_NAME);
    await deleteNodes(client, 'log-');
    await createFakeNodes(client, [{ name: 'log-1' }, { name: 'log-2' }]);
    await installCalico328(client);
  });
  afterAll(async () => {
    await client?.delete(K.lease, LOCK_NAMESPACE, LOCK_NAME).catch(() => undefined);
    if (client) await deleteNodes(client, 'log-').catch(() => undefined);
    client?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('apply: one line per step start and one per result, no progress-bar line, nothing twice', async () => {
    const bundle = path.join(dir, 'bundle-apply');
    const e = await runCli(['export', '--out', bundle]);
    expect(e.code, e.stderr).toBe(0);
    expectLogLike(e);
    const plan = path.join(dir, 'plan.yaml');
    const p = await runCli(['plan', '--to', '3.27.4', '--manifests', releasesDir(), '--bundle', bundle, '--no-disk-snapshots', '--out', plan, '-o', 'json']);
    expect(p.code, p.stderr).toBe(0);
    const steps: string[] = JSON.parse(p.stdout).steps.map((s: any) => s.id);

    const a = await runCli(['apply', plan, '--yes'], { timeoutMs: 900_000 });
    expect(a.code, explain(a)).toBe(0);
    expectLogLike(a);
    const lines = logLines(a);
    for (const [i] of steps.entries()) {
      const mine = lines.filter((l) => l.startsWith(`[${i + 1}/${steps.length}] `));
      expect(mine, `step ${i + 1} (${steps[i]}): its start and its result`).toHaveLength(2);
    }
  });

  it('restore: no progress-bar line, each warning once, a note ten objects share is one line (-v lists each)', async () => {
    const inst = await client.get(INSTALLATION, undefined, 'default');
    await client.apply(K.namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'log-owner' } }, { fieldManager: 'log-e2e' });
    const ns = await client.get(K.namespace, undefined, 'log-owner');
    const set = (name: string, owner: { apiVersion: string; kind: string; name: string; uid: string }): KubeObject => ({
      apiVersion: 'crd.projectcalico.org/v1',
      kind: 'GlobalNetworkSet',
      metadata: { name, ownerReferences: [owner] },
      spec: { nets: ['192.0.2.0/24'] },
    });
    // Ten sets owned by a namespace that will be gone, one by the Installation that restore writes back first.
    for (let i = 0; i < OWNED; i++)
      await client.create(GNS, set(`log-owned-${i}`, { apiVersion: 'v1', kind: 'Namespace', name: 'log-owner', uid: ns.metadata.uid! }));
    await client.create(
      GNS,
      set('log-owned-by-installation', { apiVersion: 'operator.tigera.io/v1', kind: 'Installation', name: 'default', uid: inst.metadata.uid! }),
    );
    const bundle = path.join(dir, 'bundle-restore');
    const e = await runCli(['export', '--out', bundle]);
    expect(e.code, e.stderr).toBe(0);

    // The owners go, and with them (the garbage collector) what they owned. Restore brings the sets and the
    // Installation back; the namespace is in neither the cluster nor the bundle: ten references dropped, a warning each.
    await client.delete(INSTALLATION, undefined, 'default');
    await client.delete(K.namespace, undefined, 'log-owner');
    const ownedGone = async () => ((await client.listAll(GNS)).some((s) => s.metadata.name.startsWith('log-owned')) ? undefined : true);
    await client.waitFor('the owned sets to be garbage-collected', ownedGone, { timeoutMs: 300_000 });
    const r = await runCli(['restore', bundle, '--resources', '--yes'], { timeoutMs: 900_000 });
    expect(r.code, explain(r)).toBe(0);
    expectLogLike(r);
    const out = `${r.stderr}\n${r.stdout}`;
    expect(out).toContain(
      `note: ${OWNED} objects: ownerReferences to Namespace log-owner dropped: the owner is neither in the cluster nor in the bundle (-v lists them)`,
    );
    expect(out.match(/log-owned-\d: ownerReferences to Namespace log-owner dropped/g), 'one summary line, no line per object').toBeNull();
    expect((await client.get(GNS, undefined, 'log-owned-by-installation')).metadata.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'Installation', name: 'default', uid: (await client.get(INSTALLATION, undefined, 'default')).metadata.uid }),
    ]);

    // -v: every object's note, each once.
    for (let i = 0; i < OWNED; i++) await client.delete(GNS, undefined, `log-owned-${i}`);
    const v = await runCli(['restore', bundle, '--resources', '--yes', '-v'], { timeoutMs: 900_000 });
    expect(v.code, explain(v)).toBe(0);
    expect(repeated(logLines(v)), v.stderr).toEqual([]);
    const perObject = /^(?:note|warning): GlobalNetworkSet log-owned-\d: ownerReferences to Namespace log-owner dropped: .*$/gm;
    expect(`${v.stderr}\n${v.stdout}`.match(perObject), v.stdout).toHaveLength(OWNED);
  });
});
