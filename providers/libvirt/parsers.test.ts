import { describe, expect, it } from 'vitest';
import { describeTags, diskSnapshotId, hypervisorSnapshot, matchesFilter, parseTags, snapshotName } from '../../src/provider-kit/index.js';
import { parseDaemonVersion, parseDomainDisks, parseSnapshotXml } from './virsh.js';

describe('virsh output parsing', () => {
  it('reads the daemon version, not the library version, when both are printed', () => {
    expect(
      parseDaemonVersion(
        'Compiled against library: libvirt 11.3.0\nUsing library: libvirt 11.3.0\nRunning hypervisor: QEMU 7.2.22\nRunning against daemon: 9.0.0\n',
      ),
    ).toEqual([9, 0, 0]);
    expect(parseDaemonVersion('nothing here')).toBeUndefined();
  });

  it('lists disks with target, source and format; cdroms are marked as such', () => {
    const xml = `<domain><devices>
      <disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='/img/a&amp;b.qcow2'/><target dev='vda' bus='virtio'/></disk>
      <disk type='block' device='disk'><driver name='qemu' type='raw'/><source dev='/dev/vg/lv'/><target dev='vdb' bus='virtio'/></disk>
      <disk type='file' device='cdrom'><target dev='sda' bus='sata'/></disk></devices></domain>`;
    expect(parseDomainDisks(xml)).toEqual([
      { target: 'vda', source: '/img/a&b.qcow2', format: 'qcow2', device: 'disk' },
      { target: 'vdb', source: '/dev/vg/lv', format: 'raw', device: 'disk' },
      { target: 'sda', source: undefined, format: undefined, device: 'cdrom' },
    ]);
  });

  it('reads the snapshot, not the embedded domain, from snapshot-dumpxml', () => {
    const xml = `<domainsnapshot><name>cnr-b1</name><description>cni-rewind bundle=b1 cluster=u node=n1</description><state>shutoff</state>
      <creationTime>1764676800</creationTime><disks><disk name='vda' snapshot='external'><source file='/o.qcow2'/></disk></disks>
      <domain type='qemu'><name>dom</name><description>domain text</description></domain></domainsnapshot>`;
    expect(parseSnapshotXml(xml)).toEqual({
      name: 'cnr-b1',
      description: 'cni-rewind bundle=b1 cluster=u node=n1',
      state: 'shutoff',
      creationTime: new Date(1764676800 * 1000),
      kind: 'external',
    });
  });
});

describe('description tags and snapshot ids', () => {
  it('round-trips the tags through a description, with free text after them', () => {
    const d = describeTags({ bundleId: 'prod-20261202T120000Z', clusterId: 'abc-123', node: 'worker-1' }, 'before upgrade');
    expect(d).toBe('cni-rewind bundle=prod-20261202T120000Z cluster=abc-123 node=worker-1 before upgrade');
    expect(parseTags(d)).toEqual({ bundleId: 'prod-20261202T120000Z', clusterId: 'abc-123', node: 'worker-1' });
    expect(parseTags("someone else's snapshot")).toBeUndefined();
  });

  it('filters by bundle, cluster and age', () => {
    const t = { bundleId: 'b', clusterId: 'c', node: 'n' };
    expect(matchesFilter(t, new Date('2026-01-01'), { bundleId: 'b', clusterId: 'c', createdBefore: new Date('2026-02-01') })).toBe(true);
    expect(matchesFilter(t, new Date('2026-03-01'), { createdBefore: new Date('2026-02-01') })).toBe(false);
    expect(matchesFilter(t, undefined, { clusterId: 'other' })).toBe(false);
  });

  it('makes snapshot names Proxmox accepts, unique for long bundle ids', () => {
    expect(snapshotName('Prod-20261202T120000Z')).toBe('cnr-prod-20261202t120000z');
    const a = snapshotName('a-very-long-cluster-name-for-production-20261202T120000Z');
    const b = snapshotName('a-very-long-cluster-name-for-production-20261202T130000Z');
    for (const n of [a, b]) expect(n).toMatch(/^[a-z][a-z0-9_-]{1,39}$/);
    expect(a).not.toBe(b);
  });

  it('per-disk record ids carry the hypervisor snapshot name', () => {
    const id = diskSnapshotId('worker-1', 'cnr-b1', 'vda');
    expect(id).toBe('worker-1/cnr-b1/vda');
    expect(hypervisorSnapshot({ snapshotId: id })).toBe('cnr-b1');
    expect(hypervisorSnapshot({ snapshotId: 'DC0/vm/x/cnr-b1/Hard disk 1', details: { snapshot: 'cnr-b1' } })).toBe('cnr-b1');
  });
});
