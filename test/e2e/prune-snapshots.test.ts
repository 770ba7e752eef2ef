/**
 * `prune --snapshots`: with the AWS provider on a real moto server (EC2 and S3) and the real control plane
 * whose kwok nodes carry moto instance ids. Four backups go to s3://; `prune --keep-last 2 --snapshots` leaves exactly
 * the two newest bundles and their snapshots (DescribeSnapshots shows the others gone). A snapshot deletion that fails
 * (EC2 answering UnauthorizedOperation, through test/support/moto.ts's fault proxy, a stand-in for an IAM denial that
 * moto never returns) keeps that bundle, so its record is not lost, and the run exits 3 naming it.
 */
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { DescribeSnapshotsCommand, EC2Client } from '@aws-sdk/client-ec2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { runMotoInstances, startFaultProxy, startMoto, type Moto } from '../support/moto.js';
import { deleteNodes, runCli, testClient } from './helpers.js';

const PREFIX = 'cnr-prune-';
const BUCKET = 'cnr-prune';
const AT = `s3://${BUCKET}/nightly`;

describe('prune --snapshots (AWS provider and S3 on moto)', () => {
  let moto: Moto;
  let ec2: EC2Client;
  let s3: S3Client;
  let client: KubeClient;
  let env: Record<string, string>;
  /** Oldest first: bundle id and the snapshot ids its manifest records. */
  const backups: { id: string; snapshots: string[] }[] = [];

  const cli = (args: string[], extra: Record<string, string> = {}) => runCli(args, { env: { ...env, ...extra } });
  const liveSnapshots = async () =>
    ((await ec2.send(new DescribeSnapshotsCommand({ OwnerIds: ['self'] }))).Snapshots ?? [])
      .filter((s) => s.Tags?.some((t) => t.Key === 'cni-rewind/bundle-id'))
      .map((s) => s.SnapshotId!)
      .sort();
  const listedIds = async () => {
    const r = await cli(['list', AT, '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout).map((b: any) => b.id);
  };

  beforeAll(async () => {
    moto = await startMoto();
    env = { ...moto.env, AWS_ENDPOINT_URL_S3: moto.url, NODE_NO_WARNINGS: '1' };
    ec2 = new EC2Client({ region: 'us-east-1', endpoint: moto.url, credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' } });
    s3 = new S3Client({ region: 'us-east-1', endpoint: moto.url, forcePathStyle: true, credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' } });
    await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
    client = await testClient();
    await deleteNodes(client, PREFIX);
    const ids = await runMotoInstances(ec2, 2);
    await createFakeNodes(
      client,
      ids.map((id, i) => ({ name: `${PREFIX}${i + 1}`, providerID: `aws:///us-east-1a/${id}`, labels: { 'cnr-test': 'prune' } })),
    );
    for (let i = 0; i < 4; i++) {
      const r = await cli(['backup', '--selector', 'cnr-test=prune', '--out', AT, '-o', 'json']);
      expect(r.code, r.stderr).toBe(0);
      const out = JSON.parse(r.stdout);
      expect(out.complete).toBe(true);
      const snaps = await liveSnapshots();
      backups.push({ id: out.bundleId, snapshots: snaps.filter((s) => !backups.some((b) => b.snapshots.includes(s))) });
      expect(backups[i]!.snapshots).toHaveLength(4); // 2 nodes x (root + data volume)
      await new Promise((r) => setTimeout(r, 1100)); // distinct createdAt seconds
    }
  }, 300_000);

  afterAll(async () => {
    if (client) await deleteNodes(client, PREFIX);
    client?.close();
    ec2?.destroy();
    s3?.destroy();
    await moto?.stop();
  });

  it('--dry-run lists the snapshots of the bundles that would go and deletes nothing', async () => {
    const r = await cli(['prune', AT, '--keep-last', '2', '--snapshots', '--dry-run', '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.deleted.map((p: string) => p.split('/').pop())).toEqual([`${backups[1]!.id}.tar.gz`, `${backups[0]!.id}.tar.gz`]);
    expect([...out.snapshots.wouldDelete].sort()).toEqual([...backups[0]!.snapshots, ...backups[1]!.snapshots].sort());
    const table = await cli(['prune', AT, '--keep-last', '2', '--snapshots', '--dry-run']);
    expect(table.stdout).toContain(backups[0]!.snapshots[0]);
    expect(await liveSnapshots()).toHaveLength(16);
    expect(await listedIds()).toHaveLength(4);
  });

  it('a snapshot that cannot be deleted keeps its bundle (exit 3 naming it); the next prune leaves exactly the two newest and their snapshots', async () => {
    const stuck = backups[0]!.snapshots[1]!;
    const proxy = await startFaultProxy(moto.url, [
      {
        action: 'DeleteSnapshot',
        match: (f) => f.get('SnapshotId') === stuck,
        status: 403,
        code: 'UnauthorizedOperation',
        message: 'You are not authorized to perform this operation.',
      },
    ]);
    try {
      const r = await cli(['prune', AT, '--keep-last', '2', '--snapshots', '-o', 'json'], { AWS_ENDPOINT_URL_EC2: proxy.url });
      expect(r.code, r.stderr).toBe(3);
      expect(r.stderr).toContain(`${backups[0]!.id}.tar.gz`);
      expect(r.stderr).toContain(stuck);
      expect(proxy.hits[0]).toBeGreaterThan(0);
    } finally {
      await proxy.close();
    }
    // The second-oldest went with its snapshots; the oldest is still listed and still holds the stuck snapshot.
    expect(await listedIds()).toEqual([backups[3]!.id, backups[2]!.id, backups[0]!.id]);
    expect(await liveSnapshots()).toContain(stuck);
    for (const s of backups[1]!.snapshots) expect(await liveSnapshots()).not.toContain(s);

    const again = await cli(['prune', AT, '--keep-last', '2', '--snapshots', '-o', 'json']);
    expect(again.code, again.stderr).toBe(0);
    expect(await listedIds()).toEqual([backups[3]!.id, backups[2]!.id]);
    expect(await liveSnapshots()).toEqual([...backups[2]!.snapshots, ...backups[3]!.snapshots].sort());
  });
});
