/**
 * IPAM is live state: while pods come and go, Calico's IPAM blocks and handles change every second. With the real
 * Calico 3.28.1 programs (the v1.34.3 operator, the Calico API server, kube-controllers, calicoctl) and the IPAM
 * driver (libcalico-go's IPAM client called as the CNI plugin calls it), pods are added and deleted during
 * `backup`, after it, during `restore --resources` into the same cluster, and during `apply` of a 3.28.1 -> 3.27.4
 * downgrade and then of a 3.27.4 -> 3.28.1 upgrade (the real operators handing over both ways; the upgrade also
 * puts back a drifted pool under the datastore lock). Afterwards every address the driver's log says is held is
 * still allocated to its handle, no address is allocated twice, and `calicoctl ipam check` finds no problem but the
 * churn's own (its fake pods have no Pod object, so every address they hold counts as "allocated but not in use").
 * Each node has the VXLAN tunnel address calico-node would allocate from the default pool (`ipam-driver tunnel`); after
 * the restore and after the upgrade it is still allocated to its handle and named by the Node, and calico-node's next
 * reconcile keeps it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { Journal } from '../../src/apply/journal.js';
import { RecordingIoHost, Reporter } from '../../src/io/host.js';
import { lockDatastore } from '../../src/restore/guards.js';
import { calicoctl, waitOperator, waitTigeraStatusAvailable } from './calico-support.js';
import { releasesDir } from '../support/releases.js';
import { calicoType, runCli } from './helpers.js';
import {
  expectIpamIntact,
  heldByLog,
  ipamCheck,
  readEvents,
  startChurn,
  stopAllChurns,
  freshInstall328,
  teardownInstall,
  type DriverEvent,
  type IpamCheck,
} from './ipam-support.js';
import { allocateTunnels, expectTunnelsIntact, type TunnelAddrs } from './tunnel-support.js';
import { until } from '../support/until.js';

const NODES = ['ipam-node-1', 'ipam-node-2'];
const USER_POOL = 'churn-user-pool';
const CLUSTER_INFO = calicoType('clusterinformations', 'ClusterInformation');
const USER_POOL_SPEC = { cidr: '10.201.0.0/16', blockSize: 26, ipipMode: 'Never', vxlanMode: 'Never', natOutgoing: false, nodeSelector: 'all()' };
const cluster = new LocalCluster({ name: process.env.CNI_REWIND_CLUSTER_NAME ?? 'e2e' });
const dir = mkdtempSync(path.join(os.tmpdir(), 'ipam-churn-'));
const log = path.join(dir, 'driver.jsonl');
const bundle = path.join(dir, 'bundle');
let client: KubeClient;
let baseline: IpamCheck;
let tunnels: TunnelAddrs[];
let backupStart = '';
let backupEnd = '';
// Fake pods' container ids derive from their names: names unique to this run never meet an earlier run's handles.
const run = Date.now().toString(36);

const events = () => readEvents(log);
const driverState = () => `the IPAM driver's last events: ${JSON.stringify(events().slice(-5))}`;
const count = (op: DriverEvent['op'], after = '', prefix = '') => events().filter((e) => e.op === op && e.t > after && (e.pod ?? '').startsWith(prefix)).length;

describe('IPAM under churn through backup, diff, restore --resources and apply both ways (real Calico programs and libcalico-go IPAM)', () => {
  beforeAll(async () => {
    client = await freshInstall328(cluster, NODES, ['v1.32.10']);
    // calico-node's start on each node: a VXLAN tunnel address from default-ipv4-ippool (VXLANCrossSubnet).
    tunnels = await allocateTunnels(NODES);
    baseline = await ipamCheck();
  }, 60 * 60_000);

  // Each test stops its churn before it judges IPAM; one that failed before that point must not leave its driver
  // allocating and releasing under the next test (whose check would then see addresses go while it reads them).
  afterEach(() => stopAllChurns());

  afterAll(async () => {
    await teardownInstall(cluster, client, 'ipam-node-');
    rmSync(dir, { recursive: true, force: true });
  }, 600_000);

  it('starts from a clean IPAM', () => {
    // Only the nodes' tunnel addresses are allocated, and in use: the only problems are the kwok pods' addresses, which are outside every pool.
    expect(tunnels.map((t) => [t.node, !!t.vxlan, t.ipip])).toEqual(NODES.map((n) => [n, true, '']));
    expect(baseline.nodeTunnelIps).toBe(NODES.length);
    expect(baseline.leaked).toBe(0);
    expect(baseline.outsidePoolIps.length).toBe(baseline.notInPools);
    expect(baseline.noAllocation + baseline.handlesWithoutIps + baseline.missingHandles, baseline.text).toBe(0);
    expect(baseline.problems).toBe(baseline.notInPools);
  });

  it('pods come and go during and after `backup`; `diff` names the handles added and released since', async () => {
    const churn = await startChurn(log, { nodes: NODES, prefix: `${run}a`, rate: 8, target: 12, durationS: 600 });
    await until('8 allocations before the backup', () => count('assign') >= 8, { timeoutMs: 120_000, intervalMs: 200, state: driverState });
    backupStart = new Date().toISOString();
    const b = await runCli(['backup', '--allow-unprotected-nodes', '--out', bundle, '-o', 'json']);
    backupEnd = new Date().toISOString();
    expect(b.code, b.stderr).toBe(0);
    await until('allocations and releases after the backup', () => count('assign', backupEnd) >= 10 && count('release', backupEnd) >= 4, {
      timeoutMs: 120_000,
      intervalMs: 200,
      state: driverState,
    });
    expect(await churn.stop()).toBe(0);
    const evs = events();
    const end = evs.filter((e) => e.op === 'end').pop()!;
    expect(end.unsettled ?? []).toEqual([]);
    console.log(
      `churn a: ${count('assign')} assigns, ${count('release')} releases, ${count('fail')} failures; ${count('assign', backupEnd)} assigns and ${count('release', backupEnd)} releases after the backup; ${end.held} held`,
    );

    const d = await runCli(['diff', bundle, '-o', 'json']);
    expect(d.code, d.stderr).toBe(1);
    const diff = JSON.parse(d.stdout);
    const names = (refs: { kind: string; name: string }[], kind: string) => new Set(refs.filter((r) => r.kind === kind).map((r) => r.name));
    const held = heldByLog(evs);
    // Allocated after the backup and still held: handles the bundle does not have.
    const added = evs.filter((e) => e.op === 'assign' && e.t > backupEnd && held.has(e.handle!)).map((e) => e.handle!);
    // Allocated before the backup started, released after it ended: handles only the bundle has.
    const assignedBefore = new Set(evs.filter((e) => e.op === 'assign' && e.t < backupStart).map((e) => e.handle!));
    const released = evs.filter((e) => e.op === 'release' && e.t > backupEnd && assignedBefore.has(e.handle!)).map((e) => e.handle!);
    expect(added.length).toBeGreaterThan(0);
    const onlyInCluster = names(diff.onlyInCluster, 'IPAMHandle');
    for (const h of added) expect(onlyInCluster.has(h), `${h} only in the cluster`).toBe(true);
    const onlyInBundle = names(diff.onlyInBundle, 'IPAMHandle');
    for (const h of released) expect(onlyInBundle.has(h), `${h} only in the bundle`).toBe(true);
    expect(diff.changed.some((c: any) => c.ref.kind === 'IPAMBlock')).toBe(true);
  }, 600_000);

  it('`restore --resources` while pods still come and go: no allocation lost, none held twice, ipam check clean but for the churn', async () => {
    const churn = await startChurn(log, { nodes: NODES, prefix: `${run}b`, rate: 8, target: 12, durationS: 600, seed: 2 });
    await until('allocations before the restore', () => count('assign', '', `${run}b-`) >= 4, { timeoutMs: 120_000, intervalMs: 200, state: driverState });
    const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json']);
    const restoreEnd = new Date().toISOString();
    expect(r.code, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout);
    // The CNI plugin works again once the restore has released the datastore lock.
    await until('allocations after the restore', () => count('assign', restoreEnd, `${run}b-`) >= 4 && count('release', restoreEnd, `${run}b-`) >= 2, {
      timeoutMs: 120_000,
      intervalMs: 200,
      state: driverState,
    });
    expect(await churn.stop()).toBe(0);
    const evs = events();
    expect(evs.filter((e) => e.op === 'end').pop()!.unsettled ?? []).toEqual([]);
    const written = result.actions.filter((a: any) => a.phase === 'ipam' && ['create', 'update', 'replace'].includes(a.action)).length;
    console.log(
      `churn b: ${count('assign', '', `${run}b-`)} assigns, ${count('release', '', `${run}b-`)} releases, ${count('fail', '', `${run}b-`)} failures (datastore lock); restore wrote ${written} IPAM objects; counts ${JSON.stringify(result.counts)}`,
    );

    await expectIpamIntact(client, evs);
    await expectTunnelsIntact(client, tunnels);
  }, 600_000);

  it('`apply` of a 3.28.1 -> 3.27.4 downgrade plan while pods come and go: the real v1.32 operator takes over, verify-data passes, IPAM intact', async () => {
    const churn = await startChurn(log, { nodes: NODES, prefix: `${run}c`, rate: 8, target: 12, durationS: 900, seed: 3 });
    await until('allocations before the backup', () => count('assign', '', `${run}c-`) >= 4, { timeoutMs: 120_000, intervalMs: 200, state: driverState });
    const bundle2 = path.join(dir, 'bundle-apply');
    const b = await runCli(['backup', '--allow-unprotected-nodes', '--out', bundle2, '-o', 'json']);
    expect(b.code, b.stderr).toBe(0);
    const plan = path.join(dir, 'plan.yaml');
    const p = await runCli(['plan', '--to', '3.27.4', '--manifests', releasesDir(), '--bundle', bundle2, '--no-disk-snapshots', '--out', plan, '-o', 'json']);
    expect(p.code, p.stderr).toBe(0);
    const planned = JSON.parse(p.stdout);
    // Blocks changed by the churn between backup and plan are live state, not drift to undo.
    expect(planned.findings.find((f: any) => f.id === 'changed-since-backup')?.objects ?? []).toEqual([]);
    const applyStart = new Date().toISOString();
    const a = await runCli(['apply', plan, '--yes', '-o', 'json']);
    const applyEnd = new Date().toISOString();
    expect(a.code, `${a.stdout}\n${a.stderr}`).toBe(0);
    await waitOperator(cluster, 'v1.32.10');
    await until('allocations after the apply', () => count('assign', applyEnd, `${run}c-`) >= 4 && count('release', applyEnd, `${run}c-`) >= 2, {
      timeoutMs: 120_000,
      intervalMs: 200,
      state: driverState,
    });
    expect(await churn.stop()).toBe(0);
    const evs = events();
    expect(evs.filter((e) => e.op === 'end').pop()!.unsettled ?? []).toEqual([]);
    const during = (op: DriverEvent['op']) => evs.filter((e) => e.op === op && e.t > applyStart && e.t < applyEnd && e.pod?.startsWith(`${run}c-`)).length;
    console.log(
      `churn c: during apply ${during('assign')} assigns, ${during('release')} releases, ${during('fail')} failures; apply ${JSON.stringify(JSON.parse(a.stdout).steps?.map((s: any) => s.id ?? s) ?? a.stdout.slice(0, 300))}`,
    );
    expect(during('assign') + during('release')).toBeGreaterThan(0);
    await expectIpamIntact(client, evs);
  }, 1_200_000);

  it('`apply` of a 3.27.4 -> 3.28.1 upgrade plan with --restore-drift while pods come and go: the real v1.34 operator takes over, the datastore lock costs retries only, IPAM intact', async () => {
    // Starts where the downgrade left the cluster: 3.27.4 under the real v1.32.10 operator.
    await waitOperator(cluster, 'v1.32.10', 10_000);
    // A user's pool, changed after the backup: --restore-drift puts it back under the datastore lock, so the
    // upgrade takes the lock while the driver's ADDs and DELs keep coming (an in-place upgrade alone never locks).
    await calicoctl(
      ['create', '-f', '-'],
      JSON.stringify({ apiVersion: 'projectcalico.org/v3', kind: 'IPPool', metadata: { name: USER_POOL }, spec: USER_POOL_SPEC }),
    );
    const churn = await startChurn(log, { nodes: NODES, prefix: `${run}d`, rate: 8, target: 12, durationS: 900, seed: 4 });
    const mine = (e: DriverEvent, from: string, to: string) => e.t > from && e.t < to && (e.pod ?? '').startsWith(`${run}d-`);
    await until('allocations before the backup', () => count('assign', '', `${run}d-`) >= 4, { timeoutMs: 120_000, intervalMs: 200, state: driverState });
    // The datastore lock as restore and apply take it (lockDatastore), held until the driver has run into it: the lock
    // inside apply lasts well under a second, too short to meet a call every time. Every ADD and DEL fails meanwhile,
    // as the CNI plugin's do; a failed ADD is retried as a DEL until it succeeds.
    const lockedAt = new Date().toISOString();
    const lock = await lockDatastore(client, CLUSTER_INFO, new Reporter(new RecordingIoHost()));
    await until('driver calls refused under the lock', () => count('fail', lockedAt, `${run}d-`) >= 3, {
      timeoutMs: 60_000,
      intervalMs: 200,
      state: driverState,
    });
    await lock!.release();
    const unlockedAt = new Date().toISOString();
    const bundle3 = path.join(dir, 'bundle-upgrade');
    const backupFrom = new Date().toISOString();
    const b = await runCli(['backup', '--allow-unprotected-nodes', '--out', bundle3, '-o', 'json']);
    expect(b.code, b.stderr).toBe(0);
    await calicoctl(['patch', 'ippool', USER_POOL, '-p', '{"spec":{"natOutgoing":true}}']);
    const plan = path.join(dir, 'plan-upgrade.yaml');
    const planFrom = new Date().toISOString();
    const from = ['--manifests', releasesDir(), '--bundle', bundle3, '--no-disk-snapshots'];
    const p = await runCli(['plan', '--to', '3.28.1', ...from, '--restore-drift', '--out', plan, '-o', 'json']);
    expect(p.code, p.stderr).toBe(0);
    const planned = JSON.parse(p.stdout);
    expect(planned).toMatchObject({ direction: 'upgrade', current: { version: 'v3.27.4' }, target: { version: 'v3.28.1' } });
    // Only the user's change is drift: the blocks and handles the churn changed since the backup are live state.
    expect(planned.findings.find((f: any) => f.id === 'changed-since-backup')?.objects).toEqual([`IPPool/${USER_POOL}`]);
    const applyFrom = new Date().toISOString();
    const a = await runCli(['apply', plan, '--yes', '-o', 'json']);
    const applyTo = new Date().toISOString();
    expect(a.code, `${a.stdout}\n${a.stderr}`).toBe(0);
    const res = JSON.parse(a.stdout);
    const st = await waitOperator(cluster, 'v1.34.3', 10_000);
    await until('allocations after the apply', () => count('assign', applyTo, `${run}d-`) >= 4 && count('release', applyTo, `${run}d-`) >= 2, {
      timeoutMs: 120_000,
      intervalMs: 200,
      state: driverState,
    });
    expect(await churn.stop()).toBe(0);
    const evs = events();
    expect(evs.filter((e) => e.op === 'end').pop()!.unsettled ?? []).toEqual([]);

    // The journal: the lock was taken and released inside restore-drift, and verify-data passed.
    const journal = Journal.read(res.journal).records;
    const stepTime = (event: string, step: string) => journal.find((r) => r.event === event && 'step' in r && r.step === step)?.time ?? '';
    const verified = journal.find((r) => r.event === 'step-end' && r.step === 'verify-data');
    expect(verified && 'summary' in verified ? verified.summary : undefined).toMatch(/present and unchanged/);
    expect(a.stderr).toMatch(/datastoreReady=false while pools and IPAM are written/);
    expect(a.stderr).toMatch(/datastoreReady back to true/);
    const ci = await client.get(CLUSTER_INFO, undefined, 'default');
    expect(ci.spec.datastoreReady).toBe(true);
    // Put back as backed up: natOutgoing false, which the stored object leaves out.
    expect((await client.get(calicoType('ippools', 'IPPool'), undefined, USER_POOL)).spec.natOutgoing ?? false).toBe(false);
    // What the target operator did, reported after it started: calico-node at 3.28.1, its own TigeraStatus.
    expect(res.steps.find((s: any) => s.id === 'wait-rollout').summary).toMatch(/calico-node rendered at v3\.28\.1.*TigeraStatus calico Available/);
    const ts = await waitTigeraStatusAvailable(client, 'calico', 60_000);
    const started = st.operator!.startedAt!.replace(/\.\d+Z$/, 'Z'); // TigeraStatus times have whole seconds
    expect((ts.metadata.creationTimestamp ?? '') >= started, `TigeraStatus calico created ${ts.metadata.creationTimestamp}, v1.34.3 started ${started}`).toBe(
      true,
    );

    // Failures: only the lock's (the test's, and restore-drift's when a call met it); each failed ADD released by its retried DEL.
    const lockFrom = stepTime('step-start', 'restore-drift');
    const lockTo = stepTime('step-end', 'restore-drift');
    const fails = evs.filter((e) => e.op === 'fail' && (e.pod ?? '').startsWith(`${run}d-`));
    // A call that read ClusterInformation just before the release reports its failure a moment after it.
    const within = (t: string, from: string, to: string) => Date.parse(t) >= Date.parse(from) && Date.parse(t) <= Date.parse(to) + 2000;
    for (const f of fails) {
      expect(f).toMatchObject({ error: 'Calico is currently not ready to process requests' });
      expect(within(f.t, lockedAt, unlockedAt) || within(f.t, lockFrom, lockTo), `${f.call} failed at ${f.t}, outside the datastore lock`).toBe(true);
    }
    for (const f of fails.filter((e) => e.call === 'assign'))
      expect(
        evs.some((e) => e.op === 'release' && e.handle === f.handle && e.t > f.t),
        `the failed ADD of ${f.handle} released`,
      ).toBe(true);
    const n = (op: DriverEvent['op'], from: string, to: string) => evs.filter((e) => e.op === op && mine(e, from, to)).length;
    console.log(
      `churn d: lock held by the test ${n('fail', lockedAt, backupFrom)} failures; backup ${n('assign', backupFrom, planFrom)}+${n('release', backupFrom, planFrom)}, plan ${n('assign', planFrom, applyFrom)}+${n('release', planFrom, applyFrom)}, apply ${n('assign', applyFrom, applyTo)} assigns ${n('release', applyFrom, applyTo)} releases ${n('fail', applyFrom, applyTo)} failures (${n('fail', lockFrom, lockTo)} inside restore-drift ${lockFrom}..${lockTo}: ${fails.map((f) => `${f.call} ${f.t}`).join(', ')}); apply ${res.steps.map((s: any) => `${s.id} ${(s.ms / 1000).toFixed(1)}s`).join(', ')}`,
    );
    expect(n('assign', applyFrom, applyTo) + n('release', applyFrom, applyTo)).toBeGreaterThan(0);
    await expectIpamIntact(client, evs);
    await expectTunnelsIntact(client, tunnels);
  }, 1_200_000);
});
