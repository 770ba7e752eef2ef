/**
 * The root-volume restore through CreateReplaceRootVolumeTask, polled to a final state. moto does not implement
 * replace-root-volume tasks, so the task calls go to a clearly labelled STAND-IN (test/support/moto.ts
 * startReplaceRootStandIn) in front of a real moto server, which walks the task through its states and swaps the
 * root volume on moto; everything else (snapshots, volumes, stop/start) is real moto, the node is a real kwok node.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DescribeInstancesCommand, DescribeVolumesCommand, EC2Client } from '@aws-sdk/client-ec2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { providerSetFor } from '../../src/providers/session.js';
import { restoreNodeDisks } from '../../src/restore/disks.js';
import { readBundleManifest } from '../../src/bundle/reader.js';
import { emptyMapping } from '../../src/config/mapping.js';
import { RecordingIoHost, Reporter } from '../../src/io/host.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { runMotoInstances, startMoto, startReplaceRootStandIn, type Moto, type ReplaceRootStandIn } from '../support/moto.js';
import { deleteNodes, runCli, testClient } from './helpers.js';

const PREFIX = 'cnr-rroot-';

describe('AWS root volume restore by replace-root-volume task (moto + a stand-in for the task API)', () => {
  let moto: Moto;
  let standIn: ReplaceRootStandIn;
  let ec2: EC2Client;
  let client: KubeClient;
  let ids: string[] = [];
  let bundlePath = '';
  const env = () => ({ ...moto.env, AWS_ENDPOINT_URL_EC2: standIn.url });

  const devices = async (id: string) => {
    const i = (await ec2.send(new DescribeInstancesCommand({ InstanceIds: [id] }))).Reservations![0]!.Instances![0]!;
    return Object.fromEntries(i.BlockDeviceMappings!.map((m) => [m.DeviceName!, m.Ebs!.VolumeId!]));
  };

  async function restore(nodes: string[]) {
    const saved = { ...process.env };
    Object.assign(process.env, env());
    const host = new RecordingIoHost();
    const reporter = new Reporter(host);
    const providers = providerSetFor({ providers: { aws: { pollSeconds: 1 } }, backup: {} }, reporter);
    try {
      const manifest = await readBundleManifest(bundlePath);
      const run = await restoreNodeDisks(
        client,
        manifest,
        providers,
        { nodes, concurrency: 1, drainTimeoutMs: 60_000, readyTimeoutMs: 60_000, mapping: emptyMapping() },
        reporter,
      );
      return { run, manifest };
    } finally {
      await providers.closeAll();
      process.env = saved;
    }
  }

  beforeAll(async () => {
    moto = await startMoto();
    standIn = await startReplaceRootStandIn(moto.url);
    ec2 = new EC2Client({ region: 'us-east-1', endpoint: moto.url, credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' }, maxAttempts: 1 });
    client = await testClient();
    await deleteNodes(client, PREFIX);
    ids = await runMotoInstances(ec2, 2);
    await createFakeNodes(
      client,
      ids.map((id, i) => ({ name: `${PREFIX}${i}`, providerID: `aws:///us-east-1a/${id}`, labels: { 'cnr-test': 'rroot' } })),
    );
    bundlePath = path.join(mkdtempSync(path.join(tmpdir(), 'cnr-rroot-')), 'b');
    const r = await runCli(['backup', '--selector', 'cnr-test=rroot', '--out', bundlePath], { env: { ...env(), NODE_NO_WARNINGS: '1' } });
    if (r.code !== 0) throw new Error(`backup failed: ${r.stderr}`);
  });

  afterAll(async () => {
    await deleteNodes(client, PREFIX);
    client?.close();
    ec2?.destroy();
    await standIn?.close();
    await moto?.stop();
  });

  it('replaces the root volume from its snapshot (task polled to succeeded) and the data volume by swap', async () => {
    const node = `${PREFIX}0`;
    const before = await devices(ids[0]!);
    const { run, manifest } = await restore([node]);
    expect(run.outcomes).toEqual([expect.objectContaining({ node, state: 'done', cordoned: false })]);
    expect(standIn.tasks).toHaveLength(1);
    const task = standIn.tasks[0]!;
    expect(task).toMatchObject({ instanceId: ids[0], state: 'succeeded', deleteReplaced: false });
    expect(task.describes).toBeGreaterThanOrEqual(3); // pending -> in-progress -> succeeded: polled, not assumed
    const rootRec = manifest.snapshots.find((s) => s.node === node && s.boot)!;
    expect(task.snapshotId).toBe(rootRec.snapshotId);
    const after = await devices(ids[0]!);
    for (const dev of ['/dev/sda1', '/dev/sdf']) {
      expect(after[dev]).not.toBe(before[dev]);
      const v = (await ec2.send(new DescribeVolumesCommand({ VolumeIds: [after[dev]!] }))).Volumes![0]!;
      expect(v.SnapshotId).toBe(manifest.snapshots.find((s) => s.node === node && s.device === dev)!.snapshotId);
    }
    // The replaced root volume is kept (DeleteReplacedRootVolume false).
    expect((await ec2.send(new DescribeVolumesCommand({ VolumeIds: [before['/dev/sda1']!] }))).Volumes).toHaveLength(1);
  });

  it('a failed task stops the rollout: the failing node is left cordoned and said so, the next node is not started', async () => {
    const [first, second] = [`${PREFIX}0`, `${PREFIX}1`];
    const secondBefore = await devices(ids[1]!);
    standIn.failNext = true;
    try {
      const { run } = await restore([first, second]);
      expect(run.ok).toBe(false);
      expect(run.outcomes).toEqual([
        expect.objectContaining({ node: first, state: 'failed', failedAt: 'restore-disks', cordoned: true }),
        expect.objectContaining({ node: second, state: 'pending', cordoned: false }),
      ]);
      expect(run.outcomes[0]!.error).toMatch(/replace-root-volume task replacevol-[0-9a-f]+ for i-[0-9a-f]+ ended failed/);
      expect((await client.get(K.node, undefined, first)).spec?.unschedulable).toBe(true);
      expect((await client.get(K.node, undefined, second)).spec?.unschedulable).toBeFalsy();
      expect(await devices(ids[1]!)).toEqual(secondBefore);
    } finally {
      await client.mergePatch(K.node, undefined, first, { spec: { unschedulable: null } });
    }
  });
});
