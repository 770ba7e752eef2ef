/**
 * The disk policy through the CLI, on moto and the real test cluster: a node's instance has a root volume, a data
 * volume and a third volume that a PersistentVolume of the cluster names (EBS CSI style). backup covers the
 * first two and lists the third as skipped; --include-volumes adds it; restore --disks leaves the PV volume
 * alone once it has moved to another instance; a recorded volume replaced by hand is refused by name.
 * Also: a node in an AWS Local Zone (`aws:///us-west-2-lax-1a/i-...`) resolves to region us-west-2 (moto knows no
 * Local Zones: a stand-in answers DescribeAvailabilityZones for it, see the test).
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  AttachVolumeCommand,
  CreateVolumeCommand,
  DescribeAvailabilityZonesCommand,
  DescribeImagesCommand,
  DescribeInstancesCommand,
  DescribeSnapshotsCommand,
  DescribeVolumesCommand,
  DetachVolumeCommand,
  EC2Client,
  RunInstancesCommand,
  StopInstancesCommand,
} from '@aws-sdk/client-ec2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import type { ResourceType } from '../../src/kube/types.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { ec2Server, forward, startMoto, type Moto } from '../support/moto.js';
import { deleteNodes, runCli, testClient } from './helpers.js';

const PREFIX = 'cnr-awsvol-';
const PV: ResourceType = { group: '', version: 'v1', plural: 'persistentvolumes', kind: 'PersistentVolume', namespaced: false };
const PV_NAME = `${PREFIX}pv-data`;

describe('AWS disk policy: PersistentVolume disks, restore by volume id, Local Zone region (moto + real cluster)', () => {
  let moto: Moto;
  let ec2: EC2Client;
  let client: KubeClient;
  let dir: string;
  let cfg: string;
  let node = '';
  let instance = '';
  let other = '';
  let vols: Record<string, string> = {};

  const cli = (args: string[]) => runCli(args, { env: { ...moto.env, NODE_NO_WARNINGS: '1' } });

  async function runInstance(client: EC2Client, zone: string, extra: { DeviceName: string; Ebs: { VolumeSize: number } }[] = []): Promise<string> {
    const img = (await client.send(new DescribeImagesCommand({}))).Images?.find((i) => i.RootDeviceName === '/dev/sda1');
    const r = await client.send(
      new RunInstancesCommand({
        ImageId: img!.ImageId!,
        MinCount: 1,
        MaxCount: 1,
        Placement: { AvailabilityZone: zone },
        BlockDeviceMappings: [{ DeviceName: '/dev/sda1', Ebs: { VolumeSize: 8, DeleteOnTermination: true } }, ...extra],
      }),
    );
    return r.Instances![0]!.InstanceId!;
  }

  async function volumesOf(id: string, c = ec2): Promise<Record<string, string>> {
    const d = await c.send(new DescribeInstancesCommand({ InstanceIds: [id] }));
    return Object.fromEntries((d.Reservations![0]!.Instances![0]!.BlockDeviceMappings ?? []).map((m) => [m.DeviceName!, m.Ebs!.VolumeId!]));
  }

  async function waitVolume(id: string, state: string): Promise<void> {
    for (let i = 0; i < 50; i++) {
      const v = (await ec2.send(new DescribeVolumesCommand({ VolumeIds: [id] }))).Volumes![0]!;
      if (v.State === state) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`volume ${id} never ${state}`);
  }

  beforeAll(async () => {
    moto = await startMoto();
    ec2 = new EC2Client({ region: 'us-east-1', endpoint: moto.url, credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' }, maxAttempts: 1 });
    client = await testClient();
    await deleteNodes(client, PREFIX);
    await client.delete(PV, undefined, PV_NAME).catch(() => false);
    dir = mkdtempSync(path.join(tmpdir(), 'cnr-awsvol-'));
    cfg = path.join(dir, 'cni-rewind.yaml');
    // moto has no replace-root-volume tasks (covered in aws-replace-root.test.ts): the root is left alone here.
    writeFileSync(cfg, 'providers:\n  aws:\n    rootRestore: skip\n    pollSeconds: 1\n');
    instance = await runInstance(ec2, 'us-east-1a', [
      { DeviceName: '/dev/sdf', Ebs: { VolumeSize: 10 } },
      { DeviceName: '/dev/sdg', Ebs: { VolumeSize: 5 } },
    ]);
    other = await runInstance(ec2, 'us-east-1a');
    vols = await volumesOf(instance);
    node = `${PREFIX}1`;
    await createFakeNodes(client, [{ name: node, providerID: `aws:///us-east-1a/${instance}`, labels: { 'cnr-test': 'awsvol' } }]);
    await client.create(PV, {
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: { name: PV_NAME },
      spec: {
        capacity: { storage: '5Gi' },
        accessModes: ['ReadWriteOnce'],
        persistentVolumeReclaimPolicy: 'Retain',
        csi: { driver: 'ebs.csi.aws.com', volumeHandle: vols['/dev/sdg']!, fsType: 'ext4' },
      },
    });
  });

  afterAll(async () => {
    await deleteNodes(client, PREFIX);
    await client?.delete(PV, undefined, PV_NAME).catch(() => false);
    client?.close();
    ec2?.destroy();
    await moto?.stop();
  });

  const snapshotsOf = async (volumeId: string) =>
    (await ec2.send(new DescribeSnapshotsCommand({ Filters: [{ Name: 'volume-id', Values: [volumeId] }] }))).Snapshots ?? [];

  it('backup snapshots the root and data volumes and lists the PV volume as skipped (output and manifest)', async () => {
    const out = path.join(dir, 'b-default');
    const r = await cli(['backup', '--nodes', node, '--out', out, '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const res = JSON.parse(r.stdout);
    expect(res.snapshots.map((s: any) => s.disk).sort()).toEqual([vols['/dev/sda1'], vols['/dev/sdf']].sort());
    const skipped = { node, machine: instance, disk: vols['/dev/sdg'], device: '/dev/sdg', pv: PV_NAME };
    expect(res.skippedDisks).toEqual([expect.objectContaining(skipped)]);
    const manifest = JSON.parse(readFileSync(path.join(out, 'manifest.json'), 'utf8'));
    expect(manifest.complete).toBe(true);
    expect(manifest.snapshots).toHaveLength(2);
    expect(manifest.skippedDisks).toEqual([expect.objectContaining(skipped)]);
    // No snapshot of the PV volume is left in EC2 (moto ignores ExcludeDataVolumeIds; the provider deletes it).
    expect(await snapshotsOf(vols['/dev/sdg']!)).toEqual([]);
    const text = await cli(['backup', '--nodes', node, '--out', path.join(dir, 'b-text')]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain(`${node} /dev/sdg ${vols['/dev/sdg']} (pv ${PV_NAME})`);
  });

  let full = '';
  it('--include-volumes adds the PV volume, recorded with its PV', async () => {
    full = path.join(dir, 'b-full');
    const r = await cli(['backup', '--nodes', node, '--out', full, '--include-volumes', '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const manifest = JSON.parse(readFileSync(path.join(full, 'manifest.json'), 'utf8'));
    expect(manifest.snapshots.map((s: any) => s.device).sort()).toEqual(['/dev/sda1', '/dev/sdf', '/dev/sdg']);
    expect(manifest.snapshots.find((s: any) => s.device === '/dev/sdg')).toMatchObject({ disk: vols['/dev/sdg'], pv: PV_NAME, state: 'completed' });
    expect(manifest.skippedDisks).toBeUndefined();
    expect(await snapshotsOf(vols['/dev/sdg']!)).toHaveLength(1);
  });

  it('restore --disks --include-volumes after the PV volume moved to another instance leaves it untouched', async () => {
    const pvVol = vols['/dev/sdg']!;
    await ec2.send(new DetachVolumeCommand({ VolumeId: pvVol, InstanceId: instance }));
    await waitVolume(pvVol, 'available');
    await ec2.send(new AttachVolumeCommand({ VolumeId: pvVol, InstanceId: other, Device: '/dev/sdh' }));
    const r = await cli(['restore', full, '--disks', '--nodes', node, '--include-volumes', '--config', cfg, '--yes', '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const run = JSON.parse(r.stdout);
    expect(run.outcomes).toEqual([expect.objectContaining({ node, state: 'done' })]);
    expect(run.plan[0].untouched).toEqual([
      expect.objectContaining({ device: '/dev/sdg', disk: pvVol, pv: PV_NAME, reason: expect.stringContaining('not attached') }),
    ]);
    expect(run.outcomes[0].result.restored.map((x: any) => x.device)).toEqual(['/dev/sdf']);
    // The PV volume is still on the other instance, and nothing new was attached in its old place.
    expect((await volumesOf(other))['/dev/sdh']).toBe(pvVol);
    const after = await volumesOf(instance);
    expect(after['/dev/sdg']).toBeUndefined();
    expect(after['/dev/sdf']).not.toBe(vols['/dev/sdf']);
    expect(after['/dev/sda1']).toBe(vols['/dev/sda1']);
  });

  it('a recorded volume replaced by hand since the backup is refused by name (exit 5), nothing touched', async () => {
    const current = (await volumesOf(instance))['/dev/sdf']!;
    const byHand = (await ec2.send(new CreateVolumeCommand({ AvailabilityZone: 'us-east-1a', Size: 10 }))).VolumeId!;
    await ec2.send(new StopInstancesCommand({ InstanceIds: [instance] }));
    await ec2.send(new DetachVolumeCommand({ VolumeId: current, InstanceId: instance }));
    await waitVolume(current, 'available');
    await ec2.send(new AttachVolumeCommand({ VolumeId: byHand, InstanceId: instance, Device: '/dev/sdf' }));
    const before = await volumesOf(instance);
    const r = await cli(['restore', full, '--disks', '--nodes', node, '--config', cfg, '--yes']);
    expect(r.code, r.stdout + r.stderr).toBe(5);
    expect(r.stderr).toContain(`/dev/sdf now holds ${byHand}, not ${vols['/dev/sdf']} recorded in the bundle`);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(await volumesOf(instance)).toEqual(before);
    expect((await client.get(K.node, undefined, node)).spec?.unschedulable).toBeFalsy();
  });

  it('a node in a Local Zone (aws:///us-west-2-lax-1a/i-...) resolves to region us-west-2 and is backed up there', async () => {
    const west = new EC2Client({
      region: 'us-west-2',
      endpoint: moto.url,
      credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' },
      maxAttempts: 1,
    });
    // What moto answers: it knows no Local Zones (DescribeAvailabilityZones does not list them and RunInstances
    // refuses the zone). So the instance runs in us-west-2a, the Local Zone's parent, and a STAND-IN in front of
    // moto answers DescribeAvailabilityZones for us-west-2-lax-1a as EC2 documents it (zoneType local-zone,
    // regionName us-west-2); every other call goes to moto unchanged.
    const zones = await west.send(new DescribeAvailabilityZonesCommand({ AllAvailabilityZones: true }));
    expect(zones.AvailabilityZones!.map((z) => z.ZoneName)).not.toContain('us-west-2-lax-1a');
    await expect(runInstance(west, 'us-west-2-lax-1a')).rejects.toThrow(/Invalid Availability Zone/);
    const asked: string[] = [];
    const standIn = await ec2Server(async (req, res, body, form) => {
      const region = /Credential=[^/]+\/[^/]+\/([^/]+)\//.exec(String(req.headers.authorization))?.[1];
      if (form.get('Action') === 'DescribeAvailabilityZones' && form.get('ZoneName.1') === 'us-west-2-lax-1a') {
        asked.push(region ?? '');
        const item =
          region === 'us-west-2'
            ? '<item><zoneName>us-west-2-lax-1a</zoneName><zoneState>available</zoneState><regionName>us-west-2</regionName><zoneId>usw2-lax1-az1</zoneId><zoneType>local-zone</zoneType><parentZoneName>us-west-2a</parentZoneName><groupName>us-west-2-lax-1</groupName><networkBorderGroup>us-west-2-lax-1</networkBorderGroup><optInStatus>opted-in</optInStatus></item>'
            : '';
        const xml = `<?xml version="1.0" encoding="UTF-8"?>\n<DescribeAvailabilityZonesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>00000000-0000-0000-0000-000000000001</requestId><availabilityZoneInfo>${item}</availabilityZoneInfo></DescribeAvailabilityZonesResponse>`;
        res.writeHead(200, { 'content-type': 'text/xml;charset=UTF-8', 'content-length': Buffer.byteLength(xml) });
        return void res.end(xml);
      }
      await forward(moto.url, req, res, body);
    });
    try {
      const id = await runInstance(west, 'us-west-2a');
      const lz = `${PREFIX}lax`;
      await createFakeNodes(client, [{ name: lz, providerID: `aws:///us-west-2-lax-1a/${id}` }]);
      const out = path.join(dir, 'b-lax');
      const r = await runCli(['backup', '--nodes', lz, '--out', out, '-o', 'json'], {
        env: { ...moto.env, AWS_ENDPOINT_URL_EC2: standIn.url, NODE_NO_WARNINGS: '1' },
      });
      expect(r.code, r.stderr).toBe(0);
      // The region came from EC2's answer about the zone, asked in the region the zone name starts with.
      expect(asked).toEqual(['us-west-2']);
      const manifest = JSON.parse(readFileSync(path.join(out, 'manifest.json'), 'utf8'));
      expect(manifest.snapshots).toEqual([
        expect.objectContaining({ node: lz, machine: id, state: 'completed', location: expect.objectContaining({ region: 'us-west-2' }) }),
      ]);
      const snaps = await west.send(new DescribeSnapshotsCommand({ SnapshotIds: [manifest.snapshots[0].snapshotId] }));
      expect(snaps.Snapshots).toHaveLength(1);
    } finally {
      west.destroy();
      await standIn.close();
    }
  });
});
