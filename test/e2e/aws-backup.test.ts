/**
 * backup / snapshots / restore --disks against the real test cluster whose kwok nodes carry the instance ids of
 * EC2 instances in a real moto server (real SDK calls over HTTP on 127.0.0.1).
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  DescribeImagesCommand,
  DescribeInstancesCommand,
  DescribeSnapshotsCommand,
  DescribeVolumesCommand,
  EC2Client,
  RunInstancesCommand,
  TerminateInstancesCommand,
} from '@aws-sdk/client-ec2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { providerSetFor } from '../../src/providers/session.js';
import { restoreNodeDisks } from '../../src/restore/disks.js';
import { readBundleManifest } from '../../src/bundle/reader.js';
import { emptyMapping } from '../../src/config/mapping.js';
import { RecordingIoHost, Reporter } from '../../src/io/host.js';
import { startMoto, type Moto } from '../support/moto.js';
import { deleteNodes, runCli, testClient } from './helpers.js';

const PREFIX = 'cnr-aws-';
const SELECTOR = 'cnr-test=aws';

describe('backup with the AWS EC2 provider (moto server)', () => {
  let moto: Moto;
  let ec2: EC2Client;
  let client: KubeClient;
  let dir: string;
  const instances: { node: string; id: string; volumes: Record<string, string> }[] = [];
  let bundleId = '';
  let bundlePath = '';

  const cli = (args: string[], env: Record<string, string> = {}) => runCli(args, { env: { ...moto.env, NODE_NO_WARNINGS: '1', ...env } });

  async function runInstance(): Promise<string> {
    const img = (await ec2.send(new DescribeImagesCommand({}))).Images?.find((i) => i.RootDeviceName === '/dev/sda1');
    const r = await ec2.send(
      new RunInstancesCommand({
        ImageId: img!.ImageId!,
        MinCount: 1,
        MaxCount: 1,
        Placement: { AvailabilityZone: 'us-east-1a' },
        BlockDeviceMappings: [
          { DeviceName: '/dev/sda1', Ebs: { VolumeSize: 8, DeleteOnTermination: true } },
          { DeviceName: '/dev/sdf', Ebs: { VolumeSize: 10, VolumeType: 'gp3' } },
          { DeviceName: '/dev/sdg', Ebs: { VolumeSize: 20 } },
        ],
      }),
    );
    return r.Instances![0]!.InstanceId!;
  }

  async function volumesOf(id: string): Promise<Record<string, string>> {
    const d = await ec2.send(new DescribeInstancesCommand({ InstanceIds: [id] }));
    const inst = d.Reservations![0]!.Instances![0]!;
    return Object.fromEntries((inst.BlockDeviceMappings ?? []).map((m) => [m.DeviceName!, m.Ebs!.VolumeId!]));
  }

  beforeAll(async () => {
    moto = await startMoto();
    ec2 = new EC2Client({ region: 'us-east-1', endpoint: moto.url, credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' }, maxAttempts: 1 });
    client = await testClient();
    await deleteNodes(client, PREFIX);
    dir = mkdtempSync(path.join(tmpdir(), 'cnr-aws-'));
    for (let i = 1; i <= 3; i++) {
      const id = await runInstance();
      instances.push({ node: `${PREFIX}${i}`, id, volumes: await volumesOf(id) });
    }
    await createFakeNodes(
      client,
      instances.map((x) => ({ name: x.node, providerID: `aws:///us-east-1a/${x.id}`, labels: { 'cnr-test': 'aws' } })),
    );
  });

  afterAll(async () => {
    await deleteNodes(client, PREFIX);
    client?.close();
    ec2?.destroy();
    await moto?.stop();
  });

  it('backs up every volume of every node: bundle complete, snapshots completed and tagged', async () => {
    bundlePath = path.join(dir, 'b1');
    const r = await cli(['backup', '--selector', SELECTOR, '--out', bundlePath, '--concurrency', '2', '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.complete).toBe(true);
    const manifest = JSON.parse(readFileSync(path.join(bundlePath, 'manifest.json'), 'utf8'));
    bundleId = manifest.id;
    expect(manifest.complete).toBe(true);
    expect(manifest.snapshots).toHaveLength(9);
    for (const inst of instances) {
      const recs = manifest.snapshots.filter((s: any) => s.node === inst.node);
      expect(recs.map((s: any) => s.device).sort()).toEqual(['/dev/sda1', '/dev/sdf', '/dev/sdg']);
      for (const rec of recs) {
        expect(rec).toMatchObject({ provider: 'aws', machine: inst.id, state: 'completed', disk: inst.volumes[rec.device] });
        expect(rec.boot).toBe(rec.device === '/dev/sda1');
      }
    }
    // The snapshots exist in EC2, carry the tags, and come from the recorded volumes.
    const snaps = await ec2.send(new DescribeSnapshotsCommand({ SnapshotIds: manifest.snapshots.map((s: any) => s.snapshotId) }));
    expect(snaps.Snapshots).toHaveLength(9);
    for (const s of snaps.Snapshots!) {
      const tags = Object.fromEntries(s.Tags!.map((t) => [t.Key, t.Value]));
      const rec = manifest.snapshots.find((x: any) => x.snapshotId === s.SnapshotId);
      expect(tags).toMatchObject({
        'cni-rewind': 'cni-rewind',
        'cni-rewind/bundle-id': bundleId,
        'cni-rewind/cluster-id': manifest.cluster.uid,
        'cni-rewind/node': rec.node,
      });
      expect(s.VolumeId).toBe(rec.disk);
      expect(s.State).toBe('completed');
    }
    expect(manifest.cluster.uid).toBe((await client.get(K.namespace, undefined, 'kube-system')).metadata.uid);
  });

  it('snapshots list finds them by tag, without the bundle', async () => {
    const r = await cli(['snapshots', 'list', '--bundle', bundleId, '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const list = JSON.parse(r.stdout);
    expect(list).toHaveLength(9);
    expect(new Set(list.map((s: any) => s.node))).toEqual(new Set(instances.map((i) => i.node)));
    expect(list.every((s: any) => s.bundleId === bundleId && s.state === 'completed' && s.device)).toBe(true);
    const none = await cli(['snapshots', 'list', '--bundle', 'no-such-bundle', '-o', 'json']);
    expect(JSON.parse(none.stdout)).toEqual([]);
  });

  /**
   * restore --disks goes through runRestoreDisks (src/cli/commands/restore-disks.ts), which the `restore`
   * command calls; these tests run the same engine in-process (real cluster, real moto), with the provider
   * environment a user would set.
   */
  async function restoreDisks(node: string, opts: { dryRun?: boolean; config?: Record<string, unknown> } = {}) {
    const saved = { ...process.env };
    Object.assign(process.env, moto.env);
    const host = new RecordingIoHost();
    const reporter = new Reporter(host);
    const providers = providerSetFor({ providers: { aws: opts.config ?? {} }, backup: {} }, reporter);
    try {
      const manifest = await readBundleManifest(bundlePath);
      const run = await restoreNodeDisks(
        client,
        manifest,
        providers,
        { nodes: [node], concurrency: 1, drainTimeoutMs: 60_000, readyTimeoutMs: 60_000, dryRun: opts.dryRun, mapping: emptyMapping() },
        reporter,
      );
      return { run, host, manifest };
    } finally {
      await providers.closeAll();
      process.env = saved;
    }
  }

  it('restore --disks --dry-run shows the per-node plan and changes nothing', async () => {
    const node = instances[0]!;
    const { run } = await restoreDisks(node.node, { dryRun: true });
    expect(run.dryRun).toBe(true);
    expect(run.plan).toEqual([
      expect.objectContaining({
        node: node.node,
        provider: 'aws',
        machine: node.id,
        disks: expect.arrayContaining([expect.objectContaining({ device: '/dev/sdf', snapshotId: expect.stringMatching(/^snap-/) })]),
      }),
    ]);
    expect(await volumesOf(node.id)).toEqual(node.volumes);
    expect((await client.get(K.node, undefined, node.node)).spec?.unschedulable).toBeFalsy();
  });

  it('restore --disks on one node replaces its data volumes with volumes from the snapshots and uncordons it', async () => {
    const node = instances[1]!;
    // moto has no replace-root-volume tasks: the root restore by task is covered against a stand-in (aws-replace-root.test.ts).
    const { run, host, manifest } = await restoreDisks(node.node, { config: { rootRestore: 'skip', pollSeconds: 1 } });
    expect(run.outcomes, JSON.stringify(host.messages.filter((m) => m.level === 'error'))).toEqual([
      expect.objectContaining({ node: node.node, state: 'done', cordoned: false }),
    ]);
    // The node went through cordon and drain before its disks were touched.
    const codes = host.codes();
    expect(codes.indexOf('CNR_DRAIN_START')).toBeGreaterThanOrEqual(0);
    expect(codes.indexOf('CNR_DRAIN_START')).toBeLessThan(codes.indexOf('CNR_RESTORE_DISKS_NODE'));
    const after = await volumesOf(node.id);
    expect(after['/dev/sda1']).toBe(node.volumes['/dev/sda1']);
    for (const dev of ['/dev/sdf', '/dev/sdg']) {
      expect(after[dev]).not.toBe(node.volumes[dev]);
      const v = (await ec2.send(new DescribeVolumesCommand({ VolumeIds: [after[dev]!] }))).Volumes![0]!;
      const rec = manifest.snapshots.find((s: any) => s.node === node.node && s.device === dev)!;
      expect(v.SnapshotId).toBe(rec.snapshotId);
      expect(v.State).toBe('in-use');
      // The replaced volume is kept (not deleted) and tagged with the run id.
      const old = (await ec2.send(new DescribeVolumesCommand({ VolumeIds: [node.volumes[dev]!] }))).Volumes![0]!;
      expect(old.State).toBe('available');
      expect(old.Tags?.find((t) => t.Key === 'cni-rewind/replaced-by-run')?.Value).toBe(run.runId);
    }
    const inst = (await ec2.send(new DescribeInstancesCommand({ InstanceIds: [node.id] }))).Reservations![0]!.Instances![0]!;
    expect(inst.State?.Name).toBe('running');
    const k8sNode = await client.get(K.node, undefined, node.node);
    expect(k8sNode.spec?.unschedulable).toBeFalsy();
    // The other nodes were not touched.
    expect(await volumesOf(instances[0]!.id)).toEqual(instances[0]!.volumes);
  });

  it('through the CLI: restore BUNDLE --disks --dry-run prints the plan; --yes restores the node (exit 0, uncordoned)', async () => {
    const node = instances[2]!;
    const dry = await cli(['restore', bundlePath, '--disks', '--nodes', node.node, '--dry-run']);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain(`node ${node.node} (aws ${node.id})`);
    expect(dry.stdout).toMatch(/cordon[\s\S]*drain[\s\S]*\/dev\/sdf <- snap-[\s\S]*uncordon/);
    expect(await volumesOf(node.id)).toEqual(node.volumes);
    const noYes = await cli(['restore', bundlePath, '--disks', '--nodes', node.node]);
    expect(noYes.code).toBe(5); // no TTY, no --yes: nothing is touched
    expect(await volumesOf(node.id)).toEqual(node.volumes);
    const cfg = path.join(dir, 'cni-rewind-skip-root.yaml');
    (await import('node:fs')).writeFileSync(cfg, 'providers:\n  aws:\n    rootRestore: skip\n    pollSeconds: 1\n');
    const r = await cli(['restore', bundlePath, '--disks', '--nodes', node.node, '--config', cfg, '--yes', '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).outcomes).toEqual([expect.objectContaining({ node: node.node, state: 'done', cordoned: false })]);
    const after = await volumesOf(node.id);
    expect(after['/dev/sdf']).not.toBe(node.volumes['/dev/sdf']);
    expect((await client.get(K.node, undefined, node.node)).spec?.unschedulable).toBeFalsy();
  });

  it('refuses (exit 5) when a node has no provider, unless --allow-unprotected-nodes', async () => {
    await createFakeNodes(client, [{ name: `${PREFIX}bare`, labels: { 'cnr-test': 'aws' } }]);
    try {
      const r = await cli(['backup', '--selector', SELECTOR, '--out', path.join(dir, 'refused')]);
      expect(r.code).toBe(5);
      expect(r.stderr).toContain(`${PREFIX}bare (no spec.providerID and no mapping file entry)`);
      expect(r.stderr).toContain('--allow-unprotected-nodes');
      expect(r.stderr).not.toMatch(/\n\s+at /);
      const ok = await cli(['backup', '--selector', SELECTOR, '--out', path.join(dir, 'b-unprotected'), '--allow-unprotected-nodes', '-o', 'json']);
      expect(ok.code, ok.stderr).toBe(0);
      const out = JSON.parse(ok.stdout);
      expect(out.unprotected).toEqual([expect.objectContaining({ node: `${PREFIX}bare` })]);
      const manifest = JSON.parse(readFileSync(path.join(dir, 'b-unprotected', 'manifest.json'), 'utf8'));
      expect(manifest.notes.join('\n')).toContain(`${PREFIX}bare has no disk snapshot`);
      expect(manifest.snapshots).toHaveLength(9);
      await cli(['snapshots', 'delete', '--bundle', manifest.id, '--yes']);
    } finally {
      await client.delete(K.node, undefined, `${PREFIX}bare`);
    }
  });

  it('a failed snapshot fails the backup (exit 3): bundle committed incomplete with what was made; --cleanup-on-failure deletes them', async () => {
    const doomed = await runInstance();
    await createFakeNodes(client, [{ name: `${PREFIX}doomed`, providerID: `aws:///us-east-1a/${doomed}`, labels: { 'cnr-test': 'aws' } }]);
    await ec2.send(new TerminateInstancesCommand({ InstanceIds: [doomed] }));
    try {
      const out = path.join(dir, 'b-fail');
      const r = await cli(['backup', '--selector', SELECTOR, '--out', out, '--cleanup-on-failure', '-o', 'json']);
      expect(r.code, r.stderr).toBe(3);
      const res = JSON.parse(r.stdout);
      expect(res.complete).toBe(false);
      expect(res.nodes.find((n: any) => n.node === `${PREFIX}doomed`)).toMatchObject({ ok: false });
      const manifest = JSON.parse(readFileSync(path.join(out, 'manifest.json'), 'utf8'));
      expect(manifest.complete).toBe(false);
      expect(manifest.notes.join('\n')).toContain(`node ${PREFIX}doomed`);
      // The healthy nodes' snapshots were made, recorded, then deleted by --cleanup-on-failure.
      expect(manifest.snapshots).toHaveLength(9);
      expect(manifest.snapshots.every((s: any) => s.state === 'deleted')).toBe(true);
      const left = await cli(['snapshots', 'list', '--bundle', manifest.id, '-o', 'json']);
      expect(JSON.parse(left.stdout)).toEqual([]);
      // verify and inspect say so.
      const v = await cli(['verify', out]);
      expect(v.code).toBe(2);
      expect(v.stdout + v.stderr).toMatch(/marked incomplete/);
      const ins = await cli(['inspect', out]);
      expect(ins.stdout).toMatch(/Complete\s+no/);
    } finally {
      await client.delete(K.node, undefined, `${PREFIX}doomed`);
    }
  });

  it('snapshots delete --bundle removes them (and asks first: exit 5 without --yes and no TTY)', async () => {
    const refused = await cli(['snapshots', 'delete', '--bundle', bundleId]);
    expect(refused.code).toBe(5);
    const r = await cli(['snapshots', 'delete', '--bundle', bundleId, '--yes', '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).deleted).toBe(9);
    const list = await cli(['snapshots', 'list', '--bundle', bundleId, '-o', 'json']);
    expect(JSON.parse(list.stdout)).toEqual([]);
    const remaining = await ec2.send(new DescribeSnapshotsCommand({ Filters: [{ Name: 'tag:cni-rewind/bundle-id', Values: [bundleId] }] }));
    expect(remaining.Snapshots).toEqual([]);
  });

  it('bad input gives one clear line: unknown provider (2), bad duration (2), unreadable mapping (2)', async () => {
    const a = await cli(['backup', '--selector', SELECTOR, '--provider', 'nope', '--out', path.join(dir, 'x1')]);
    expect(a.code).toBe(2);
    expect(a.stderr).toContain("unknown provider 'nope'");
    const b = await cli(['backup', '--selector', SELECTOR, '--snapshot-timeout', 'soon', '--out', path.join(dir, 'x2')]);
    expect(b.code).toBe(2);
    expect(b.stderr).toContain("'soon' is not a duration");
    const c = await cli(['backup', '--selector', SELECTOR, '--mapping', path.join(dir, 'missing.yaml'), '--out', path.join(dir, 'x3')]);
    expect(c.code).toBe(2);
    expect(c.stderr).toContain('cannot read node mapping file');
    for (const x of [a, b, c]) expect(x.stderr).not.toMatch(/\n\s+at /);
  });
});
