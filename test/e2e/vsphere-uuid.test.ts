/**
 * vSphere nodes as the vSphere cloud provider names them (`vsphere://<BIOS UUID>`), their VMs moved into folders
 * of vcsim (govmomi's simulator, test/support/vcsim.ts): backup and restore --disks find them through
 * SearchIndex.FindByUuid with no mapping file. A session terminated from a second client between two calls of
 * one provider run is logged in again, and so is one terminated while a CLI backup of four nodes runs.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import vsphereModule from '../../providers/vsphere/index.js';
import { VimClient, moref, type MoRef } from '../../providers/vsphere/soap.js';
import { child, childrenNamed, textOf, type XmlNode } from '../../providers/vsphere/xml.js';
import { RecordingIoHost, Reporter } from '../../src/io/host.js';
import type { KubeClient } from '../../src/kube/client.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { startVcsim, type VcsimHandle } from '../support/vcsim.js';
import { deleteNodes, runCli, startCli, testClient } from './helpers.js';

const PREFIX = 'cnr-vsuuid-';
const SELECTOR = 'cnr-test=vsphere-uuid';
const PORT = Number(process.env.CNI_REWIND_E2E_PORT_BASE ?? 23443) + 41;

describe('vSphere: vsphere://<uuid> providerIDs, VMs in folders, expired sessions (vcsim)', () => {
  let vcsim: VcsimHandle;
  let vim: VimClient;
  let client: KubeClient;
  let dir: string;
  let env: Record<string, string>;
  const vms: { node: string; path: string; uuid: string; ref: MoRef }[] = [];

  async function snapshotNames(vm: MoRef): Promise<string[]> {
    const [o] = await vim.retrieve('VirtualMachine', ['snapshot'], [vm]);
    const walk = (nodes: XmlNode[]): string[] => nodes.flatMap((n) => [textOf(n, 'name') ?? '', ...walk(childrenNamed(n, 'childSnapshotList'))]);
    return walk(childrenNamed(o?.props.get('snapshot'), 'rootSnapshotList'));
  }
  const prop = async (vm: MoRef, p: string) => (await vim.retrieve('VirtualMachine', [p], [vm]))[0]?.props.get(p)?.text.trim();

  beforeAll(async () => {
    vcsim = await startVcsim({ port: PORT });
    env = { GOVC_URL: vcsim.url, GOVC_USERNAME: vcsim.username, GOVC_PASSWORD: vcsim.password };
    vim = new VimClient(new URL(vcsim.url), {});
    await vim.login(vcsim.username, vcsim.password);
    // Two folders deep, so no `<datacenter>/vm/<name>` path can find them.
    const vmFolder = (await vim.findByInventoryPath('DC0/vm'))!;
    const outer = moref(
      child(
        await vim.call('CreateFolder', [
          ['_this', vmFolder],
          ['name', 'cnr-workers'],
        ]),
        'returnval',
      ),
    )!;
    const inner = moref(
      child(
        await vim.call('CreateFolder', [
          ['_this', outer],
          ['name', 'pool-a'],
        ]),
        'returnval',
      ),
    )!;
    for (const [i, name] of ['DC0_H0_VM0', 'DC0_H0_VM1'].entries()) {
      const ref = (await vim.findByInventoryPath(`DC0/vm/${name}`))!;
      await vim.waitTask(
        await vim.startTask('MoveIntoFolder_Task', [
          ['_this', inner],
          ['list', ref],
        ]),
        `move ${name}`,
        { timeoutMs: 30_000 },
      );
      vms.push({ node: `${PREFIX}${i + 1}`, path: `DC0/vm/cnr-workers/pool-a/${name}`, uuid: (await prop(ref, 'config.uuid'))!, ref });
    }
    client = await testClient();
    await deleteNodes(client, PREFIX);
    dir = mkdtempSync(path.join(tmpdir(), 'cnr-vsuuid-'));
    await createFakeNodes(
      client,
      vms.map((v) => ({ name: v.node, providerID: `vsphere://${v.uuid}`, labels: { 'cnr-test': 'vsphere-uuid' } })),
    );
  });

  afterAll(async () => {
    await deleteNodes(client, PREFIX);
    client?.close();
    vim?.close();
    await vcsim?.stop();
  });

  it('the VMs really are in folders and have distinct UUIDs', async () => {
    for (const v of vms) expect((await vim.findByInventoryPath(v.path))?.value).toBe(v.ref.value);
    expect(await vim.findByInventoryPath('DC0/vm/DC0_H0_VM0')).toBeUndefined();
    expect(new Set(vms.map((v) => v.uuid)).size).toBe(2);
  });

  let bundlePath = '';
  it('backup with no mapping file resolves each node by UUID and snapshots its VM', async () => {
    bundlePath = path.join(dir, 'b1');
    const r = await runCli(['backup', '--selector', SELECTOR, '--out', bundlePath, '-o', 'json'], { env });
    expect(r.code, r.stderr).toBe(0);
    const manifest = JSON.parse(readFileSync(path.join(bundlePath, 'manifest.json'), 'utf8'));
    expect(manifest.complete).toBe(true);
    for (const v of vms) {
      const recs = manifest.snapshots.filter((s: any) => s.node === v.node);
      expect(recs.length).toBeGreaterThan(0);
      for (const rec of recs) expect(rec).toMatchObject({ provider: 'vsphere', machine: v.uuid, state: 'completed', location: { vm: v.ref.value } });
      expect(await snapshotNames(v.ref)).toEqual([recs[0].details.snapshot]);
    }
  });

  it('restore --disks with no mapping file reverts the VM found by UUID', async () => {
    const v = vms[1]!;
    await vim.waitTask(await vim.startTask('PowerOffVM_Task', [['_this', v.ref]]), 'power off', { timeoutMs: 30_000 });
    const r = await runCli(['restore', bundlePath, '--disks', '--nodes', v.node, '--yes', '-o', 'json'], { env });
    expect(r.code, r.stderr).toBe(0);
    const run = JSON.parse(r.stdout);
    expect(run.outcomes).toEqual([expect.objectContaining({ node: v.node, state: 'done' })]);
    expect(run.outcomes[0].result.notes.join('\n')).toMatch(/revert task .* succeeded/);
    // Powered on at snapshot time: the revert brings it back on.
    expect(await prop(v.ref, 'runtime.powerState')).toBe('poweredOn');
  });

  it('a session terminated by another client mid-run is logged in again, once', async () => {
    const host = new RecordingIoHost();
    const provider = await vsphereModule.create({
      reporter: new Reporter(host),
      config: { url: vcsim.url, username: vcsim.username, password: vcsim.password },
    });
    try {
      const target = (await provider.resolve({ name: vms[0]!.node, providerID: `vsphere://${vms[0]!.uuid}`, labels: {}, annotations: {} }))!;
      expect(target.location.vm).toBe(vms[0]!.ref.value);
      // Terminate every session but the test's own: the provider's cookie is now dead.
      const sc = await vim.serviceContent();
      const [sm] = await vim.retrieve('SessionManager', ['sessionList', 'currentSession'], [sc.sessionManager]);
      const own = textOf(sm!.props.get('currentSession'), 'key');
      const others = childrenNamed(sm!.props.get('sessionList'), 'UserSession')
        .map((s) => textOf(s, 'key')!)
        .filter((k) => k && k !== own);
      expect(others.length).toBeGreaterThan(0);
      await vim.call('TerminateSession', [
        ['_this', sc.sessionManager],
        ['sessionId', others],
      ]);
      const listed = await provider.list({});
      expect(listed.map((s) => s.node).sort()).toEqual(vms.map((v) => v.node));
      expect(host.codes().filter((c) => c === 'CNR_VSPHERE_RELOGIN')).toHaveLength(1);
      // A second run of calls needs no further login.
      await provider.list({});
      expect(host.codes().filter((c) => c === 'CNR_VSPHERE_RELOGIN')).toHaveLength(1);
    } finally {
      await provider.close?.();
    }
  });
  it('a session terminated through the SessionManager while a CLI backup of four nodes runs is re-established: the backup succeeds', async () => {
    // Two more nodes, for vcsim's other VMs (outside the folders), so the run lasts several calls per node.
    const more: { node: string; uuid: string }[] = [];
    for (const [i, name] of ['DC0_C0_RP0_VM0', 'DC0_C0_RP0_VM1'].entries()) {
      const ref = (await vim.findByInventoryPath(`DC0/vm/${name}`))!;
      more.push({ node: `${PREFIX}more-${i + 1}`, uuid: (await prop(ref, 'config.uuid'))! });
    }
    await createFakeNodes(
      client,
      more.map((v) => ({ name: v.node, providerID: `vsphere://${v.uuid}` })),
    );
    const all = [...vms.map((v) => v.node), ...more.map((v) => v.node)];
    const sc = await vim.serviceContent();
    const sessionKeys = async () => {
      const [sm] = await vim.retrieve('SessionManager', ['sessionList'], [sc.sessionManager]);
      return childrenNamed(sm!.props.get('sessionList'), 'UserSession').map((s) => textOf(s, 'key')!);
    };
    const before = new Set(await sessionKeys());
    const out = path.join(dir, 'b-killed');
    const run = startCli(['backup', '--nodes', all.join(','), '--concurrency', '4', '--out', out, '-o', 'json', '-v'], env);
    // Terminate the CLI's session as soon as it exists, while the backup goes on.
    let killed: string | undefined;
    while (!killed && !run.exited()) {
      killed = (await sessionKeys()).find((k) => !before.has(k));
      if (!killed) await new Promise((r) => setTimeout(r, 25));
    }
    expect(killed, 'the CLI logged in to vcsim').toBeDefined();
    await vim.call('TerminateSession', [
      ['_this', sc.sessionManager],
      ['sessionId', [killed!]],
    ]);
    const ran = await run.done;
    expect(ran.code, ran.stderr).toBe(0);
    expect(run.exited()).toBe(true);
    // The four nodes' calls run in parallel and all find the session gone: one login serves them all.
    expect(ran.stderr.match(/session with 127\.0\.0\.1:\d+ expired; logged in again/g)).toHaveLength(1);
    const manifest = JSON.parse(readFileSync(path.join(out, 'manifest.json'), 'utf8'));
    expect(manifest.complete).toBe(true);
    expect([...new Set(manifest.snapshots.map((s: any) => s.node))].sort()).toEqual([...all].sort());
    expect(manifest.snapshots.every((s: any) => s.state === 'completed')).toBe(true);
    expect(ran.stdout + ran.stderr).not.toContain(vcsim.password);
  });
});
