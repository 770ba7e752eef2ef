/**
 * backup / restore --disks / snapshots with the libvirt provider, against the real test cluster whose kwok nodes
 * map to domains on a real libvirtd (Debian 12's packages, started here without systemd; TCG domains with qcow2
 * disks made by qemu-img). Data written after the snapshot must be gone after the restore (checked with qemu-io).
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { providerSetFor } from '../../src/providers/session.js';
import { restoreNodeDisks } from '../../src/restore/disks.js';
import { readBundleManifest } from '../../src/bundle/reader.js';
import { loadNodeMapping } from '../../src/config/mapping.js';
import { RecordingIoHost, Reporter } from '../../src/io/host.js';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import libvirtModule from '../../providers/libvirt/index.js';
import { defineTestDomain, qemuIo, removeTestDomain, startLibvirtd, SYSTEM_URI, type LibvirtdHandle } from '../support/libvirtd.js';
import { deleteNodes, runCli, testClient } from './helpers.js';

const PREFIX = 'cnr-lv-';
const SELECTOR = 'cnr-test=libvirt';
const virsh = (...args: string[]) => execFileSync('virsh', ['-q', '-c', SYSTEM_URI, ...args], { encoding: 'utf8' }).trim();

describe('libvirt provider on a real libvirtd', () => {
  let libvirtd: LibvirtdHandle;
  let client: KubeClient;
  let dir: string;
  let mappingFile: string;
  // node 1 -> domain of the same name (the default); node 2 -> another domain name via the mapping file, running.
  const domains: Record<string, { name: string; files: string[] }> = {};
  let bundlePath = '';
  let bundleId = '';

  async function restoreDisks(node: string, config: Record<string, unknown> = {}) {
    const host = new RecordingIoHost();
    const reporter = new Reporter(host);
    const providers = providerSetFor({ providers: { libvirt: config }, backup: {} }, reporter);
    try {
      const manifest = await readBundleManifest(bundlePath);
      const run = await restoreNodeDisks(
        client,
        manifest,
        providers,
        { nodes: [node], concurrency: 1, drainTimeoutMs: 60_000, readyTimeoutMs: 60_000, mapping: await loadNodeMapping(mappingFile) },
        reporter,
      );
      return { run, host };
    } finally {
      await providers.closeAll();
    }
  }

  beforeAll(async () => {
    libvirtd = await startLibvirtd();
    client = await testClient();
    await deleteNodes(client, PREFIX);
    dir = mkdtempSync(path.join(tmpdir(), 'cnr-libvirt-'));
    for (const d of [`${PREFIX}1`, 'cnr-vm-two', 'cnr-vm-ext']) await removeTestDomain(d);
    domains[`${PREFIX}1`] = await defineTestDomain(`${PREFIX}1`, { disks: ['vda', 'vdb'] });
    domains[`${PREFIX}2`] = await defineTestDomain('cnr-vm-two', { disks: ['vda'] });
    // Data that must survive: written before the backup.
    for (const d of Object.values(domains)) for (const f of d.files) await qemuIo(f, 'write', 0xaa);
    virsh('start', 'cnr-vm-two');
    mappingFile = path.join(dir, 'mapping.yaml');
    writeFileSync(mappingFile, `nodes:\n  ${PREFIX}2: { provider: libvirt, domain: cnr-vm-two, uri: '${SYSTEM_URI}' }\n`);
    await createFakeNodes(
      client,
      [1, 2].map((i) => ({ name: `${PREFIX}${i}`, labels: { 'cnr-test': 'libvirt' } })),
    );
  });

  afterAll(async () => {
    await deleteNodes(client, PREFIX);
    client?.close();
    for (const d of [`${PREFIX}1`, 'cnr-vm-two', 'cnr-vm-ext']) await removeTestDomain(d).catch(() => undefined);
    await libvirtd?.stop();
  });

  it('backup --provider libvirt snapshots every qcow2 disk of a shut-off and a running domain', async () => {
    bundlePath = path.join(dir, 'b1');
    const r = await runCli(['backup', '--provider', 'libvirt', '--mapping', mappingFile, '--selector', SELECTOR, '--out', bundlePath, '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).complete).toBe(true);
    const manifest = JSON.parse(readFileSync(path.join(bundlePath, 'manifest.json'), 'utf8'));
    bundleId = manifest.id;
    const recs = manifest.snapshots;
    expect(recs.map((s: any) => `${s.node}/${s.machine}/${s.device}`).sort()).toEqual([
      `${PREFIX}1/${PREFIX}1/vda`,
      `${PREFIX}1/${PREFIX}1/vdb`,
      `${PREFIX}2/cnr-vm-two/vda`,
    ]);
    for (const s of recs) {
      expect(s).toMatchObject({ provider: 'libvirt', state: 'completed', location: { uri: SYSTEM_URI }, details: { mode: 'internal' } });
      expect(s.disk).toBe(domains[s.node]!.files[s.device === 'vdb' ? 1 : 0]);
    }
    expect(recs.find((s: any) => s.node === `${PREFIX}2`).details.domainState).toBe('running');
    // The snapshots are real: libvirt lists them and qemu-img sees them inside each qcow2 file.
    const name = recs[0].details.snapshot;
    expect(recs.map((s: any) => s.snapshotId).sort()).toEqual([`${PREFIX}1/${name}/vda`, `${PREFIX}1/${name}/vdb`, `cnr-vm-two/${name}/vda`]);
    expect(virsh('snapshot-list', `${PREFIX}1`, '--name')).toBe(name);
    expect(virsh('snapshot-list', 'cnr-vm-two', '--name')).toBe(name);
    for (const f of domains[`${PREFIX}1`]!.files) expect(execFileSync('qemu-img', ['snapshot', '-U', '-l', f], { encoding: 'utf8' })).toContain(name);
    // The live snapshot of the running domain also holds its RAM (VM state size > 0).
    const live = execFileSync('qemu-img', ['info', '-U', '--output=json', domains[`${PREFIX}2`]!.files[0]!], { encoding: 'utf8' });
    expect(JSON.parse(live).snapshots[0]['vm-state-size']).toBeGreaterThan(0);
  });

  it('snapshots list finds them by the description tags, without the bundle', async () => {
    const r = await runCli(['snapshots', 'list', '--provider', 'libvirt', '--bundle', bundleId, '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const list = JSON.parse(r.stdout);
    expect(list.map((s: any) => `${s.node}/${s.device}`).sort()).toEqual([`${PREFIX}1/vda`, `${PREFIX}1/vdb`, `${PREFIX}2/vda`]);
    expect(list.every((s: any) => s.bundleId === bundleId)).toBe(true);
  });

  it('restore BUNDLE --disks (CLI) of a shut-off domain: data written after the snapshot is gone, older data is back', async () => {
    const [vda, vdb] = domains[`${PREFIX}1`]!.files;
    await qemuIo(vda!, 'write', 0xbb);
    await qemuIo(vdb!, 'write', 0xcc, 2 * 1024 * 1024);
    expect(await qemuIo(vda!, 'read', 0xbb)).toBe(true);
    const r = await runCli([
      'restore',
      bundlePath,
      '--disks',
      '--nodes',
      `${PREFIX}1`,
      '--provider',
      'libvirt',
      '--mapping',
      mappingFile,
      '--yes',
      '-o',
      'json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    // The node was cordoned for the restore and is schedulable again.
    expect((await client.get(K.node, undefined, `${PREFIX}1`)).spec?.unschedulable).toBeFalsy();
    expect(await qemuIo(vda!, 'read', 0xaa)).toBe(true);
    expect(await qemuIo(vda!, 'read', 0xbb)).toBe(false);
    expect(await qemuIo(vdb!, 'read', 0xaa)).toBe(true);
    expect(await qemuIo(vdb!, 'read', 0xcc, 2 * 1024 * 1024)).toBe(false);
    expect(virsh('domstate', `${PREFIX}1`)).toBe('shut off');
  });

  it('restore --disks (engine, in-process) of a live snapshot: the domain is running again and the later data is gone', async () => {
    virsh('destroy', 'cnr-vm-two');
    const vda = domains[`${PREFIX}2`]!.files[0]!;
    await qemuIo(vda, 'write', 0xbb);
    const { run, host } = await restoreDisks(`${PREFIX}2`);
    expect(run.outcomes).toEqual([expect.objectContaining({ node: `${PREFIX}2`, state: 'done' })]);
    // Cordon/drain came before the disks were touched.
    expect(host.codes().indexOf('CNR_DRAIN_START')).toBeGreaterThanOrEqual(0);
    expect(host.codes().indexOf('CNR_DRAIN_START')).toBeLessThan(host.codes().indexOf('CNR_LIBVIRT_REVERT'));
    expect(virsh('domstate', 'cnr-vm-two')).toBe('running');
    expect(await qemuIo(vda, 'read', 0xaa)).toBe(true);
    expect(await qemuIo(vda, 'read', 0xbb)).toBe(false);
  });

  it('snapshots delete --bundle removes them from libvirt (and a second delete finds nothing)', async () => {
    const r = await runCli(['snapshots', 'delete', '--provider', 'libvirt', '--bundle', bundleId, '--yes', '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    expect(virsh('snapshot-list', `${PREFIX}1`, '--name')).toBe('');
    expect(virsh('snapshot-list', 'cnr-vm-two', '--name')).toBe('');
    const again = await runCli(['snapshots', 'list', '--provider', 'libvirt', '--bundle', bundleId, '-o', 'json']);
    expect(JSON.parse(again.stdout)).toEqual([]);
  });

  it(`external disk-only snapshots: taken atomically, and this libvirt's revert limit is reported clearly`, async () => {
    const d = await defineTestDomain('cnr-vm-ext', { disks: ['vda'] });
    await qemuIo(d.files[0]!, 'write', 0xaa);
    const host = new RecordingIoHost();
    const p = await libvirtModule.create({ reporter: new Reporter(host), config: { mode: 'external' } });
    const target = (await p.resolve({ name: 'cnr-vm-ext', labels: {}, annotations: {} }))!;
    expect(target.location).toMatchObject({ mode: 'external' });
    const recs = await p.snapshot(target, { bundleId: 'ext-test', clusterId: 'c', node: 'cnr-vm-ext' });
    expect(recs[0]).toMatchObject({ device: 'vda', details: { mode: 'external' } });
    // The domain now writes to an overlay next to the base image.
    expect(virsh('domblklist', 'cnr-vm-ext')).toContain(`cnr-vm-ext.${recs[0]!.details!.snapshot}.vda.qcow2`);
    const [major, minor] = libvirtd.version.split('.').map(Number) as [number, number];
    const canRevert = major > 9 || (major === 9 && minor >= 7);
    if (!canRevert) {
      expect(host.messages.find((m) => m.code === 'CNR_LIBVIRT_LIMIT')?.message).toContain(`libvirt ${libvirtd.version}`);
      await expect(p.restoreDisks(target, recs, { runId: 'r' })).rejects.toThrow(
        new RegExp(`libvirt ${libvirtd.version.replace(/\./g, '\\.')} at ${SYSTEM_URI} cannot revert external snapshots .*domain cnr-vm-ext was not changed`),
      );
    } else {
      const r = await p.restoreDisks(target, recs, { runId: 'r' });
      expect(r.restored).toHaveLength(1);
    }
    // Mixing kinds is refused before anything is created.
    const internal = await libvirtModule.create({ reporter: new Reporter(new RecordingIoHost()), config: {} });
    await expect(
      internal.snapshot({ ...target, location: { ...target.location, mode: 'internal' } }, { bundleId: 'mix', clusterId: 'c', node: 'x' }),
    ).rejects.toThrow(/already has external snapshots/);
    await p.delete(recs);
    await p.delete(recs); // already gone: not an error
    expect(virsh('snapshot-list', 'cnr-vm-ext', '--name')).toBe('');
  });

  it('test:/// driver: resolves domains by name and refuses internal snapshots of disks that are not qcow2', async () => {
    const p = await libvirtModule.create({ reporter: new Reporter(new RecordingIoHost()), config: { uri: 'test:///default' } });
    const t = await p.resolve({ name: 'test', labels: {}, annotations: {} });
    expect(t).toEqual({ node: 'test', provider: 'libvirt', machine: 'test', location: { uri: 'test:///default', mode: 'internal' } });
    expect(await p.resolve({ name: 'no-such-domain', labels: {}, annotations: {} })).toBeUndefined();
    await expect(p.snapshot(t!, { bundleId: 'b', clusterId: 'c', node: 'test' })).rejects.toThrow(
      /internal snapshots need qcow2 disks, but vda is of unknown format/,
    );
  });

  it('a bad URI gives one clear line and exit 4', async () => {
    const r = await runCli(['snapshots', 'list', '--provider', 'libvirt', '--all-clusters'], {
      env: { LIBVIRT_DEFAULT_URI: 'qemu+unix:///system?socket=/nonexistent/sock' },
    });
    expect(r.code).toBe(4);
    expect(r.stderr).toMatch(/libvirt \(qemu\+unix:\/\/\/system\?socket=\/nonexistent\/sock\): virsh list failed: .*(No such file|Failed to connect)/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});
