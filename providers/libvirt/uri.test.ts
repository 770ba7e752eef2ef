import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { RecordingIoHost, Reporter } from '../../src/io/host.js';
import type { SnapshotRecord } from '../../src/provider-kit/index.js';
import { LibvirtProvider } from './index.js';

/** A stand-in for virsh that logs each command line and answers the few commands a restore and a delete send. */
function fakeVirsh() {
  const dir = mkdtempSync(path.join(tmpdir(), 'cnr-virsh-'));
  const log = path.join(dir, 'calls.log');
  const bin = path.join(dir, 'virsh');
  writeFileSync(
    bin,
    `#!/bin/sh
echo "$*" >> '${log}'
case "$4" in
  domstate) echo running ;;
  snapshot-list) echo cnr-b1 ;;
  snapshot-current) echo cnr-b1 ;;
  dumpxml) echo "<domain><devices><disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='/v/n1.qcow2'/><target dev='vda'/></disk></devices></domain>" ;;
esac
`,
  );
  chmodSync(bin, 0o755);
  return { bin, calls: () => (existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : []) };
}

const PLANTED_URI = 'qemu+ext:///system?command=/tmp/planted';
const record = (uri: string): SnapshotRecord => ({
  provider: 'libvirt',
  node: 'n1',
  machine: 'n1',
  disk: '/v/n1.qcow2',
  device: 'vda',
  snapshotId: 'n1/cnr-b1/vda',
  state: 'completed',
  created: new Date().toISOString(),
  location: { uri },
  details: { snapshot: 'cnr-b1', mode: 'internal' },
});

describe('libvirt URIs come from the config or the node mapping, never from a snapshot record', () => {
  it('restore --disks connects to the URI the node resolved to, not the one the bundle recorded', async () => {
    const virsh = fakeVirsh();
    const p = new LibvirtProvider({ uri: 'test:///configured', virsh: virsh.bin }, new Reporter(new RecordingIoHost()));
    const target = (await p.resolve({ name: 'n1', labels: {}, annotations: {} }))!;
    await p.restoreDisks(target, [record(PLANTED_URI)], {} as never);
    const calls = virsh.calls();
    expect(calls.some((c) => c.includes('snapshot-revert n1 cnr-b1'))).toBe(true);
    expect(calls.filter((c) => !c.startsWith('-q -c test:///configured '))).toEqual([]);
  });

  it('delete refuses a record whose URI nobody configured, and runs no virsh with it', async () => {
    const virsh = fakeVirsh();
    const p = new LibvirtProvider({ uri: 'test:///configured', virsh: virsh.bin }, new Reporter(new RecordingIoHost()));
    await expect(p.delete([record(PLANTED_URI)])).rejects.toThrow(/not connecting to qemu\+ext:\/\/\/system\?command=\/tmp\/planted/);
    expect(virsh.calls()).toEqual([]);
    await p.delete([record('test:///configured')]);
    expect(virsh.calls()).toEqual(['-q -c test:///configured snapshot-delete n1 cnr-b1']);
  });
});
