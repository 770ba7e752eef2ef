/**
 * Fault tests for provider errors during `cni-rewind backup`: three kwok nodes whose providerIDs name
 * instances in a real moto server, reached through a fault proxy (test/support/moto.ts startFaultProxy: a stand-in
 * for EC2 errors moto never returns) that answers chosen calls with EC2's XML errors:
 *   - a permanent error on CreateSnapshots for one node's instance (`UnauthorizedOperation`, HTTP 403, and
 *     `InvalidInstanceID.NotFound`, HTTP 400), while another node's first CreateSnapshots calls get a transient
 *     `ServiceUnavailable` (HTTP 503): exit 3, the failed node and its error in the table and in -o json, the
 *     bundle committed and marked incomplete (verify rejects it, inspect says so), the snapshots made listed
 *     (output and manifest) and really present in moto; with --cleanup-on-failure they are deleted in moto;
 *   - a permanent UnauthorizedOperation on CreateTags, after EC2 made the node's snapshots: those snapshots are recorded too (not
 *     orphaned) and deleted by --cleanup-on-failure.
 * Throttling on many calls (503 RequestLimitExceeded) across a large backup is aws-fanout.test.ts.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DescribeInstancesCommand, DescribeSnapshotsCommand, EC2Client, type Snapshot } from '@aws-sdk/client-ec2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { runMotoInstances, startFaultProxy, startMoto, type FaultProxy, type FaultRule, type Moto } from '../support/moto.js';
import { deleteNodes, runCli, testClient } from './helpers.js';

const PREFIX = 'cnr-fpv-';
const SELECTOR = 'cnr-test=fpv';
const DENIED = 'You are not authorized to perform this operation. (stand-in for an IAM deny)';
interface PermanentError {
  status: number;
  code: string;
  message: string;
  /** The node's error as cni-rewind reports it. */
  reported: RegExp;
}
/** Permanent EC2 errors: a permission denied (403) and a client error (400): neither may be retried. */
const PERMANENT: PermanentError[] = [
  {
    status: 403,
    code: 'UnauthorizedOperation',
    message: DENIED,
    reported: /^AWS CreateSnapshots: permission denied \(UnauthorizedOperation\): You are not authorized/,
  },
  {
    status: 400,
    code: 'InvalidInstanceID.NotFound',
    message: "The instance ID 'i-0' does not exist",
    reported: /^AWS CreateSnapshots failed: InvalidInstanceID\.NotFound \(HTTP 400\): The instance ID 'i-0' does not exist/,
  },
];
const noStack = (s: string) => expect(s).not.toMatch(/\n\s+at .+[(:]\d+|unexpected error/);

describe('faults: provider errors during backup (moto behind a fault proxy)', () => {
  let moto: Moto;
  let ec2: EC2Client;
  let client: KubeClient;
  let dir: string;
  const nodes: { node: string; id: string; volumes: string[] }[] = [];
  const proxies: FaultProxy[] = [];

  const backup = (proxy: FaultProxy, args: string[]) =>
    runCli(['backup', '--selector', SELECTOR, '--concurrency', '3', ...args], { env: { ...moto.env, AWS_ENDPOINT_URL_EC2: proxy.url, NODE_NO_WARNINGS: '1' } });
  const proxy = async (rules: FaultRule[]) => {
    const p = await startFaultProxy(moto.url, rules);
    proxies.push(p);
    return p;
  };
  /** Snapshots in moto carrying a bundle's tag (what exists, whatever the manifest says). */
  const snapshotsOfBundle = async (bundleId: string): Promise<Snapshot[]> =>
    (await ec2.send(new DescribeSnapshotsCommand({ Filters: [{ Name: 'tag:cni-rewind/bundle-id', Values: [bundleId] }] }))).Snapshots ?? [];
  const manifestOf = (out: string) => JSON.parse(readFileSync(path.join(out, 'manifest.json'), 'utf8'));

  beforeAll(async () => {
    moto = await startMoto();
    ec2 = new EC2Client({ region: 'us-east-1', endpoint: moto.url, credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' }, maxAttempts: 1 });
    client = await testClient();
    await deleteNodes(client, PREFIX);
    dir = mkdtempSync(path.join(tmpdir(), 'cnr-faults-provider-'));
    const ids = await runMotoInstances(ec2, 3);
    for (const [i, id] of ids.entries()) {
      const inst = (await ec2.send(new DescribeInstancesCommand({ InstanceIds: [id] }))).Reservations![0]!.Instances![0]!;
      nodes.push({ node: `${PREFIX}${i + 1}`, id, volumes: inst.BlockDeviceMappings!.map((m) => m.Ebs!.VolumeId!).sort() });
    }
    await createFakeNodes(
      client,
      nodes.map((n) => ({ name: n.node, providerID: `aws:///us-east-1a/${n.id}`, labels: { 'cnr-test': 'fpv' } })),
    );
  });

  afterAll(async () => {
    await deleteNodes(client, PREFIX).catch(() => undefined);
    client?.close();
    ec2?.destroy();
    for (const p of proxies) await p.close();
    await moto?.stop();
  });

  /** A permanent 403 on CreateSnapshots for node 2's instance; node 3's first two CreateSnapshots get a transient 503. */
  const snapshotRules = (permanent: PermanentError = PERMANENT[0]!): FaultRule[] => [
    {
      action: 'CreateSnapshots',
      match: (f) => f.get('InstanceSpecification.InstanceId') === nodes[1]!.id,
      status: permanent.status,
      code: permanent.code,
      message: permanent.message,
    },
    {
      action: 'CreateSnapshots',
      match: (f) => f.get('InstanceSpecification.InstanceId') === nodes[2]!.id,
      times: 2,
      status: 503,
      code: 'ServiceUnavailable',
      message: 'The service is unavailable. Please try again shortly.',
    },
  ];

  /** The manifest and moto agree: nodes 1 and 3 have their volumes' snapshots, node 2 none. */
  async function expectSnapshotsOfNodes1And3(manifest: any, state: 'completed' | 'deleted') {
    expect(manifest.snapshots).toHaveLength(4);
    for (const n of [nodes[0]!, nodes[2]!]) {
      const recs = manifest.snapshots.filter((s: any) => s.node === n.node);
      expect(recs.map((s: any) => s.disk).sort(), n.node).toEqual(n.volumes);
      expect(recs.every((s: any) => s.machine === n.id && s.state === state && /^snap-/.test(s.snapshotId))).toBe(true);
    }
    expect(manifest.snapshots.some((s: any) => s.node === nodes[1]!.node)).toBe(false);
  }

  it.each(PERMANENT.map((e) => [e.code, e.status, e] as const))(
    'permanent %s (HTTP %i) on one node (transient 503 on another): exit 3, failure reported, bundle incomplete, the snapshots made recorded and present in moto',
    async (code, _status, permanent) => {
      const p = await proxy(snapshotRules(permanent));
      const out = path.join(dir, `b-${code}`);
      const t0 = Date.now();
      const r = await backup(p, ['--out', out, '-o', 'json']);
      console.log(
        `backup with a permanent ${code} on 1 of 3 nodes: exit ${r.code} in ${((Date.now() - t0) / 1000).toFixed(1)} s; proxy answered ${p.hits[0]} permanent, ${p.hits[1]} transient errors`,
      );
      expect(r.code, r.stderr).toBe(3);
      noStack(r.stdout + r.stderr);
      // The permanent error was not retried; the transient one was, and that node succeeded.
      expect(p.hits).toEqual([1, 2]);
      const res = JSON.parse(r.stdout);
      expect(res.complete).toBe(false);
      expect(res.cleanedUp).toBe(false);
      const failed = res.nodes.find((n: any) => n.node === nodes[1]!.node);
      expect(failed).toMatchObject({ ok: false, machine: nodes[1]!.id, snapshots: 0 });
      expect(failed.error).toMatch(permanent.reported);
      for (const n of [nodes[0]!, nodes[2]!])
        expect(
          res.nodes.find((x: any) => x.node === n.node),
          n.node,
        ).toMatchObject({ ok: true, snapshots: 2 });
      // The error line on stderr names the node and the error.
      expect(r.stderr).toContain(`error: ${nodes[1]!.node}: ${failed.error}`);

      // The bundle is committed, marked incomplete, with the snapshots that were made.
      const manifest = manifestOf(out);
      expect(manifest.id).toBe(res.bundleId);
      expect(manifest.complete).toBe(false);
      expect(manifest.notes).toContain(`backup incomplete: node ${nodes[1]!.node}: ${failed.error}`);
      await expectSnapshotsOfNodes1And3(manifest, 'completed');
      expect(res.snapshots.map((s: any) => s.snapshotId).sort()).toEqual(manifest.snapshots.map((s: any) => s.snapshotId).sort());
      // ... and they exist in moto, and nothing else of this bundle does.
      const inMoto = await snapshotsOfBundle(manifest.id);
      expect(inMoto.map((s) => s.SnapshotId).sort()).toEqual(manifest.snapshots.map((s: any) => s.snapshotId).sort());
      expect(inMoto.every((s) => s.State === 'completed')).toBe(true);
      expect(inMoto.some((s) => nodes[1]!.volumes.includes(s.VolumeId!))).toBe(false);

      const v = await runCli(['verify', out]);
      expect(v.code, v.stdout + v.stderr).toBe(2);
      expect(v.stdout + v.stderr).toMatch(/marked incomplete/);
      const ins = await runCli(['inspect', out, '-o', 'json']);
      expect(ins.code, ins.stderr).toBe(0);
      expect(JSON.parse(ins.stdout)).toMatchObject({ complete: false });
      const insTable = await runCli(['inspect', out]);
      expect(insTable.stdout).toMatch(/Complete\s+no/);
      // snapshots list finds them by tag, without the bundle.
      const list = await runCli(['snapshots', 'list', '--bundle', manifest.id, '-o', 'json'], { env: moto.env });
      expect(
        JSON.parse(list.stdout)
          .map((s: any) => s.snapshotId)
          .sort(),
      ).toEqual(manifest.snapshots.map((s: any) => s.snapshotId).sort());
    },
  );

  it('the same through the table output with --cleanup-on-failure: the failed node and error shown, the snapshots made deleted in moto', async () => {
    const p = await proxy(snapshotRules());
    const out = path.join(dir, 'b-denied-cleanup');
    const r = await backup(p, ['--out', out, '--cleanup-on-failure']);
    expect(r.code, r.stderr).toBe(3);
    noStack(r.stdout + r.stderr);
    expect(p.hits).toEqual([1, 2]);
    expect(r.stdout).toMatch(/complete\s+NO/);
    expect(r.stdout).toMatch(
      new RegExp(`${nodes[1]!.node}\\s+aws\\s+${nodes[1]!.id}\\s+0\\s+\\S+\\s+FAILED: AWS CreateSnapshots: permission denied \\(UnauthorizedOperation\\)`),
    );
    for (const n of [nodes[0]!, nodes[2]!]) expect(r.stdout).toMatch(new RegExp(`${n.node}\\s+aws\\s+${n.id}\\s+2\\s+\\S+\\s+ok`));
    expect(r.stdout).toContain('the snapshots made were deleted (--cleanup-on-failure)');
    const manifest = manifestOf(out);
    expect(manifest.complete).toBe(false);
    await expectSnapshotsOfNodes1And3(manifest, 'deleted');
    expect(manifest.notes).toContain('the snapshots of this failed backup were deleted (--cleanup-on-failure)');
    // The snapshots made were listed in the output before they were deleted.
    for (const s of manifest.snapshots) expect(r.stdout + r.stderr).toContain(s.snapshotId);
    expect(await snapshotsOfBundle(manifest.id)).toEqual([]);
    expect((await runCli(['verify', out])).code).toBe(2);
  });

  it("permanent error on CreateTags after EC2 made one node's snapshots: those snapshots are recorded (not orphaned), and --cleanup-on-failure deletes them", async () => {
    const victim = nodes[1]!;
    // Fail the per-snapshot CreateTags call for the victim's new snapshots (moto says whose a snapshot is).
    const p = await proxy([
      {
        action: 'CreateTags',
        match: async (f) => {
          const id = f.get('ResourceId.1') ?? f.get('Resources.1') ?? '';
          if (!id.startsWith('snap-')) return false;
          const s = (await ec2.send(new DescribeSnapshotsCommand({ SnapshotIds: [id] }))).Snapshots?.[0];
          return victim.volumes.includes(s?.VolumeId ?? '');
        },
        status: 403,
        code: 'UnauthorizedOperation',
        message: DENIED,
      },
    ]);
    const out = path.join(dir, 'b-tags');
    const r = await backup(p, ['--out', out, '-o', 'json']);
    expect(r.code, r.stderr).toBe(3);
    noStack(r.stdout + r.stderr);
    expect(p.hits[0]).toBeGreaterThanOrEqual(1);
    const res = JSON.parse(r.stdout);
    const failed = res.nodes.find((n: any) => n.node === victim.node);
    expect(failed).toMatchObject({ ok: false, snapshots: 2 });
    expect(failed.error).toMatch(/AWS CreateTags: permission denied \(UnauthorizedOperation\)/);
    const manifest = manifestOf(out);
    expect(manifest.complete).toBe(false);
    // Every snapshot of this bundle that exists in moto is in the manifest: the victim's two included.
    const inMoto = await snapshotsOfBundle(manifest.id);
    expect(inMoto).toHaveLength(6);
    expect(manifest.snapshots.map((s: any) => s.snapshotId).sort()).toEqual(inMoto.map((s) => s.SnapshotId).sort());
    expect(
      manifest.snapshots
        .filter((s: any) => s.node === victim.node)
        .map((s: any) => s.disk)
        .sort(),
    ).toEqual(victim.volumes);

    // With --cleanup-on-failure nothing of the failed backup is left in moto.
    const out2 = path.join(dir, 'b-tags-cleanup');
    const r2 = await backup(p, ['--out', out2, '--cleanup-on-failure', '-o', 'json']);
    expect(r2.code, r2.stderr).toBe(3);
    const m2 = manifestOf(out2);
    expect(m2.snapshots).toHaveLength(6);
    expect(m2.snapshots.every((s: any) => s.state === 'deleted')).toBe(true);
    expect(await snapshotsOfBundle(m2.id)).toEqual([]);
  });
});
