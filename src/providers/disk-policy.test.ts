import { describe, expect, it } from 'vitest';
import { RefusedError } from '../core/errors.js';
import type { KubeObject } from '../kube/types.js';
import { matchRecordedDisks, normalizeHandle, PvIndex, selectDisks } from './disk-policy.js';
import type { MachineDisk, NodeTarget, SnapshotRecord } from '../provider-kit/types.js';

const pv = (name: string, spec: Record<string, unknown>): KubeObject =>
  ({ apiVersion: 'v1', kind: 'PersistentVolume', metadata: { name }, spec }) as KubeObject;
const target: NodeTarget = { node: 'n1', provider: 'aws', machine: 'i-1', location: {} };

describe('disk policy: which disks a node backup covers', () => {
  const index = new PvIndex([
    pv('pv-csi', { csi: { driver: 'ebs.csi.aws.com', volumeHandle: 'vol-0c' } }),
    pv('pv-legacy', { awsElasticBlockStore: { volumeID: 'aws://us-east-1a/vol-0d' } }),
    pv('pv-gce', { csi: { driver: 'pd.csi.storage.gke.io', volumeHandle: 'projects/p/zones/z/disks/data-1' } }),
    pv('pv-azure', { azureDisk: { diskURI: '/subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/disks/Disk1' } }),
    pv('pv-nfs', { nfs: { server: 'x', path: '/' } }),
  ]);
  const disks: MachineDisk[] = [
    { disk: 'vol-0a', device: '/dev/xvda', boot: true },
    { disk: 'vol-0b', device: '/dev/xvdf' },
    { disk: 'vol-0c', device: '/dev/xvdba' },
    { disk: 'vol-0d', device: '/dev/xvdbb' },
    { disk: 'vol-0e', device: '/dev/xvdbc', tags: { 'kubernetes.io/created-for/pv/name': 'pv-gone' } },
    { disk: 'data-1', device: 'persistent-disk-1', aliases: ['projects/p/zones/z/disks/data-1'] },
    { disk: '/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/disks/disk1', device: 'lun0' },
  ];

  it('skips PV disks (CSI handle, legacy source, CSI tag, alias, any case) and keeps boot and own disks', () => {
    const sel = selectDisks(target, disks, index, false);
    expect(sel.snapshot).toEqual(['vol-0a', 'vol-0b']);
    expect(sel.skipped.map((s) => [s.disk, s.pv])).toEqual([
      ['vol-0c', 'pv-csi'],
      ['vol-0d', 'pv-legacy'],
      ['vol-0e', 'pv-gone'],
      ['data-1', 'pv-gce'],
      ['/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/disks/disk1', 'pv-azure'],
    ]);
    expect(sel.skipped[0]!.reason).toContain('--include-volumes');
  });

  it('--include-volumes snapshots them too and remembers their PV', () => {
    const sel = selectDisks(target, disks, index, true);
    expect(sel.snapshot).toHaveLength(disks.length);
    expect(sel.skipped).toEqual([]);
    expect(sel.volumes.get('vol-0c')).toBe('pv-csi');
    expect(sel.volumes.has('vol-0b')).toBe(false);
  });

  it('never takes a device name for a PV, and a boot disk is never a PV disk', () => {
    const byName = new PvIndex([pv('pv-dev', { csi: { volumeHandle: '/dev/xvdf' } }), pv('pv-boot', { csi: { volumeHandle: 'vol-0a' } })]);
    expect(selectDisks(target, disks.slice(0, 2), byName, false).snapshot).toEqual(['vol-0a', 'vol-0b']);
  });

  it('normalizes handles', () => {
    expect(normalizeHandle('aws://us-west-2-lax-1a/vol-0123')).toBe('vol-0123');
    expect(normalizeHandle('https://www.googleapis.com/compute/v1/projects/p/zones/z/disks/d')).toBe('projects/p/zones/z/disks/d');
  });
});

describe('disk policy: which recorded disks a restore touches', () => {
  const rec = (device: string, disk: string, extra: Partial<SnapshotRecord> = {}): SnapshotRecord => ({
    provider: 'aws',
    node: 'n1',
    machine: 'i-1',
    device,
    disk,
    snapshotId: `snap-${disk}`,
    state: 'completed',
    created: '',
    ...extra,
  });
  const records = [rec('/dev/xvda', 'vol-a', { boot: true }), rec('/dev/xvdf', 'vol-b'), rec('/dev/xvdg', 'vol-pv', { pv: 'pv-1' })];

  it('matches by recorded id, following a disk to its current device', () => {
    const live: MachineDisk[] = [
      { disk: 'vol-a', device: '/dev/xvda', boot: true },
      { disk: 'vol-b', device: '/dev/xvdh' },
      { disk: 'vol-pv', device: '/dev/xvdg' },
    ];
    const sel = matchRecordedDisks(target, records, live, true);
    expect(sel.restore.map((r) => [r.disk, r.device])).toEqual([
      ['vol-a', '/dev/xvda'],
      ['vol-b', '/dev/xvdh'],
      ['vol-pv', '/dev/xvdg'],
    ]);
  });

  it('leaves PV disks alone without --include-volumes, and a PV that moved away even with it', () => {
    const live: MachineDisk[] = [
      { disk: 'vol-a', device: '/dev/xvda', boot: true },
      { disk: 'vol-b', device: '/dev/xvdf' },
    ];
    expect(matchRecordedDisks(target, records, [...live, { disk: 'vol-pv', device: '/dev/xvdg' }], false).untouched).toEqual([
      expect.objectContaining({ disk: 'vol-pv', reason: expect.stringContaining('--include-volumes') }),
    ]);
    const moved = matchRecordedDisks(target, records, live, true);
    expect(moved.restore.map((r) => r.disk)).toEqual(['vol-a', 'vol-b']);
    expect(moved.untouched).toEqual([
      expect.objectContaining({ disk: 'vol-pv', reason: expect.stringMatching(/not attached to i-1 any more \(PersistentVolume pv-1 moved\?\)/) }),
    ]);
  });

  it('accepts a disk created from the recorded snapshot (an earlier restore)', () => {
    const live: MachineDisk[] = [
      { disk: 'vol-a', device: '/dev/xvda' },
      { disk: 'vol-new', device: '/dev/xvdf', sourceSnapshot: 'snap-vol-b' },
    ];
    expect(matchRecordedDisks(target, records.slice(0, 2), live, false).restore.map((r) => r.device)).toEqual(['/dev/xvda', '/dev/xvdf']);
  });

  it('refuses, naming both disks, when a recorded device now holds another disk', () => {
    const live: MachineDisk[] = [
      { disk: 'vol-a', device: '/dev/xvda' },
      { disk: 'vol-x', device: '/dev/xvdf', sourceSnapshot: 'snap-other' },
    ];
    expect(() => matchRecordedDisks(target, records.slice(0, 2), live, false)).toThrow(RefusedError);
    expect(() => matchRecordedDisks(target, records.slice(0, 2), live, false)).toThrow('/dev/xvdf now holds vol-x, not vol-b recorded in the bundle');
  });
});
