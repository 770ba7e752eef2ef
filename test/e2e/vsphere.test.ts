/**
 * backup / restore --disks / snapshots delete with the vSphere provider, against the real test cluster whose kwok
 * nodes map (mapping file) to VMs of vcsim, govmomi's vCenter simulator built from Go modules (test/vcsim) and
 * started here on 127.0.0.1. The provider speaks SOAP over plain HTTP POSTs; the checks read vcsim's state with
 * separate SOAP calls.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RecordingIoHost, Reporter } from '../../src/io/host.js';
import type { KubeClient } from '../../src/kube/client.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import vsphereModule from '../../providers/vsphere/index.js';
import { VimClient } from '../../providers/vsphere/soap.js';
import { childrenNamed, textOf, type XmlNode } from '../../providers/vsphere/xml.js';
import { startVcsim, type VcsimHandle } from '../support/vcsim.js';
import { deleteNodes, runCli, testClient } from './helpers.js';

const PREFIX = 'cnr-vs-';
const SELECTOR = 'cnr-test=vsphere';
const PORT = Number(process.env.CNI_REWIND_E2E_PORT_BASE ?? 23443) + 40;
const VMS = ['DC0/vm/DC0_H0_VM0', 'DC0/vm/DC0_H0_VM1'];

describe('vSphere provider on vcsim', () => {
  let vcsim: VcsimHandle;
  let vim: VimClient;
  let client: KubeClient;
  let dir: string;
  let mappingFile: string;
  let bundlePath = '';
  let bundleId = '';
  let env: Record<string, string>;

  async function snapshotNames(vmPath: string): Promise<string[]> {
    const vm = (await vim.findByInventoryPath(vmPath))!;
    const [o] = await vim.retrieve('VirtualMachine', ['snapshot'], [vm]);
    const walk = (nodes: XmlNode[]): string[] => nodes.flatMap((n) => [textOf(n, 'name') ?? '', ...walk(childrenNamed(n, 'childSnapshotList'))]);
    return walk(childrenNamed(o?.props.get('snapshot'), 'rootSnapshotList'));
  }
  async function powerState(vmPath: string): Promise<string | undefined> {
    const vm = (await vim.findByInventoryPath(vmPath))!;
    return (await vim.retrieve('VirtualMachine', ['runtime.powerState'], [vm]))[0]?.props.get('runtime.powerState')?.text.trim();
  }

  beforeAll(async () => {
    vcsim = await startVcsim({ port: PORT });
    env = { GOVC_URL: vcsim.url, GOVC_USERNAME: vcsim.username, GOVC_PASSWORD: vcsim.password };
    vim = new VimClient(new URL(vcsim.url), {});
    await vim.login(vcsim.username, vcsim.password);
    client = await testClient();
    await deleteNodes(client, PREFIX);
    dir = mkdtempSync(path.join(tmpdir(), 'cnr-vsphere-'));
    mappingFile = path.join(dir, 'mapping.yaml');
    writeFileSync(mappingFile, `nodes:\n${VMS.map((vm, i) => `  ${PREFIX}${i + 1}: { provider: vsphere, vm: '${vm}' }`).join('\n')}\n`);
    await createFakeNodes(
      client,
      [1, 2].map((i) => ({ name: `${PREFIX}${i}`, labels: { 'cnr-test': 'vsphere' } })),
    );
  });

  afterAll(async () => {
    await deleteNodes(client, PREFIX);
    client?.close();
    vim?.close();
    await vcsim?.stop();
  });

  it('backup (provider from the mapping file) creates one snapshot per VM, without memory, recorded per disk', async () => {
    bundlePath = path.join(dir, 'b1');
    const r = await runCli(['backup', '--mapping', mappingFile, '--selector', SELECTOR, '--out', bundlePath, '-o', 'json', '-v'], { env });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).complete).toBe(true);
    // The password never appears, not even in -v output.
    expect(r.stdout + r.stderr).not.toContain(vcsim.password);
    const manifest = JSON.parse(readFileSync(path.join(bundlePath, 'manifest.json'), 'utf8'));
    bundleId = manifest.id;
    for (const [i, vmPath] of VMS.entries()) {
      const recs = manifest.snapshots.filter((s: any) => s.node === `${PREFIX}${i + 1}`);
      expect(recs.length).toBeGreaterThan(0);
      for (const rec of recs) {
        expect(rec).toMatchObject({
          provider: 'vsphere',
          machine: vmPath,
          state: 'completed',
          details: { memory: false, quiesce: false, snapshotRef: expect.stringMatching(/^snapshot-/) },
        });
        expect(rec.disk).toMatch(/\.vmdk$/);
        expect(rec.details.task).toBeUndefined();
      }
      // The snapshot exists in vcsim under the recorded name.
      expect(await snapshotNames(vmPath)).toEqual([recs[0].details.snapshot]);
    }
  });

  it('snapshots list finds them by the description tags', async () => {
    const r = await runCli(['snapshots', 'list', '--provider', 'vsphere', '--bundle', bundleId, '-o', 'json'], { env });
    expect(r.code, r.stderr).toBe(0);
    const list = JSON.parse(r.stdout);
    expect(list.map((s: any) => s.node).sort()).toEqual([`${PREFIX}1`, `${PREFIX}2`]);
  });

  it('restore BUNDLE --disks reverts the VM (revert task succeeds) and powers it on again', async () => {
    const r = await runCli(['restore', bundlePath, '--disks', '--nodes', `${PREFIX}1`, '--mapping', mappingFile, '--yes', '-o', 'json'], { env });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/revert task task-\d+ succeeded/);
    expect(await powerState(VMS[0]!)).toBe('poweredOn');
  });

  it('snapshots delete --bundle removes the snapshots from vcsim', async () => {
    const r = await runCli(['snapshots', 'delete', '--provider', 'vsphere', '--bundle', bundleId, '--yes', '-o', 'json'], { env });
    expect(r.code, r.stderr).toBe(0);
    for (const vm of VMS) expect(await snapshotNames(vm)).toEqual([]);
    const again = await runCli(['snapshots', 'list', '--provider', 'vsphere', '--bundle', bundleId, '-o', 'json'], { env });
    expect(JSON.parse(again.stdout)).toEqual([]);
  });

  it('a wrong password gives one clear line, exit 4, and is never printed', async () => {
    const wrong = 'Wrong-Secret-123';
    const r = await runCli(['snapshots', 'list', '--provider', 'vsphere', '--all-clusters'], { env: { ...env, GOVC_PASSWORD: wrong } });
    expect(r.code).toBe(4);
    expect(r.stderr).toContain(`vsphere: login to 127.0.0.1:${PORT} refused for user ${vcsim.username}`);
    expect(r.stdout + r.stderr).not.toContain(wrong);
  });

  it('no URL or no credentials: BadInputError with a hint naming the GOVC_ variables; the CLI prints one line', async () => {
    const create = (config: Record<string, unknown>) => vsphereModule.create({ reporter: new Reporter(new RecordingIoHost()), config });
    const saved = { ...process.env };
    for (const k of ['GOVC_URL', 'GOVC_USERNAME', 'GOVC_PASSWORD']) delete process.env[k];
    try {
      expect(() => create({})).toThrow(
        expect.objectContaining({ name: 'BadInputError', message: 'vsphere: no vCenter/ESXi URL', hint: expect.stringContaining('GOVC_URL') }),
      );
      expect(() => create({ url: vcsim.url })).toThrow(
        expect.objectContaining({ name: 'BadInputError', message: 'vsphere: no credentials', hint: expect.stringContaining('GOVC_PASSWORD') }),
      );
    } finally {
      process.env = saved;
    }
    const r = await runCli(['snapshots', 'list', '--provider', 'vsphere', '--all-clusters'], { env: { GOVC_URL: '', GOVC_USERNAME: '', GOVC_PASSWORD: '' } });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('vsphere: no vCenter/ESXi URL');
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});
