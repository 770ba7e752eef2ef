/**
 * backup / restore --disks / snapshots with the Proxmox VE provider, against the real test cluster whose kwok
 * nodes are named like VMs of a FAKE Proxmox VE API (test/fakes/proxmox-fake.ts: no Proxmox emulator exists),
 * served over HTTPS with a certificate made here by openssl. Exercises the calls (form-encoded, token header),
 * task (UPID) polling, and the error paths: failed tasks, a rejected token, missing privileges, TLS.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { providerSetFor } from '../../src/providers/session.js';
import { restoreNodeDisks } from '../../src/restore/disks.js';
import { readBundleManifest } from '../../src/bundle/reader.js';
import { emptyMapping } from '../../src/config/mapping.js';
import { RecordingIoHost, Reporter } from '../../src/io/host.js';
import type { KubeClient } from '../../src/kube/client.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { ProxmoxFake } from '../fakes/proxmox-fake.js';
import { deleteNodes, runCli, testClient } from './helpers.js';
import { selfSignedCert } from '../support/self-signed.js';

const PREFIX = 'cnr-px-';
const SELECTOR = 'cnr-test=proxmox';
const TOKEN_ID = 'cni-rewind@pve!backup';
const SECRET = '5f0c1a7e-3b2d-4c9a-8e61-0d2f4b6a9c13';

describe('Proxmox VE provider against the Proxmox fake', () => {
  let fake: ProxmoxFake;
  let client: KubeClient;
  let dir: string;
  let configFile: string;
  let caFile: string;
  let env: Record<string, string>;
  let bundlePath = '';
  let bundleId = '';

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'cnr-proxmox-'));
    // A self-signed certificate for 127.0.0.1, like PVE's own pve-ssl.pem.
    const cert = selfSignedCert(dir, 'pve');
    caFile = cert.caFile;
    const keyFile = cert.keyFile;
    fake = new ProxmoxFake({
      tokenId: TOKEN_ID,
      tokenSecret: SECRET,
      taskPolls: 2,
      tls: { key: readFileSync(keyFile, 'utf8'), cert: readFileSync(caFile, 'utf8') },
      vms: [
        {
          node: 'pve1',
          vmid: 101,
          name: `${PREFIX}1`,
          status: 'running',
          config: { scsi0: 'local-lvm:vm-101-disk-0,size=32G', scsi1: 'local-lvm:vm-101-disk-1,size=8G', ide2: 'none,media=cdrom' },
        },
        { node: 'pve2', vmid: 102, name: `${PREFIX}2`, status: 'stopped', config: { virtio0: 'local:102/vm-102-disk-0.qcow2,size=16G' } },
      ],
    });
    await fake.start();
    configFile = path.join(dir, 'cni-rewind.yaml');
    writeFileSync(configFile, `providers:\n  proxmox:\n    caFile: ${caFile}\n    pollIntervalMs: 50\n`);
    env = { PROXMOX_VE_ENDPOINT: fake.url, PROXMOX_VE_API_TOKEN: `${TOKEN_ID}=${SECRET}` };
    client = await testClient();
    await deleteNodes(client, PREFIX);
    await createFakeNodes(
      client,
      [1, 2].map((i) => ({ name: `${PREFIX}${i}`, labels: { 'cnr-test': 'proxmox' } })),
    );
  });

  afterAll(async () => {
    await deleteNodes(client, PREFIX);
    client?.close();
    await fake?.stop();
  });

  const cli = (args: string[], extraEnv: Record<string, string> = {}) => runCli([...args, '--config', configFile], { env: { ...env, ...extraEnv } });

  it('backup --provider proxmox: finds the VMs by name, snapshots them and follows each task to OK', async () => {
    fake.requests.length = 0;
    bundlePath = path.join(dir, 'b1');
    const r = await cli(['backup', '--provider', 'proxmox', '--selector', SELECTOR, '--out', bundlePath, '-o', 'json', '-v']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).not.toContain(SECRET);
    const manifest = JSON.parse(readFileSync(path.join(bundlePath, 'manifest.json'), 'utf8'));
    bundleId = manifest.id;
    expect(manifest.complete).toBe(true);
    expect(manifest.snapshots.map((s: any) => `${s.node}/${s.device}/${s.disk}`).sort()).toEqual([
      `${PREFIX}1/scsi0/local-lvm:vm-101-disk-0`,
      `${PREFIX}1/scsi1/local-lvm:vm-101-disk-1`,
      `${PREFIX}2/virtio0/local:102/vm-102-disk-0.qcow2`,
    ]);
    const name = manifest.snapshots[0].details.snapshot;
    expect(name).toMatch(/^[a-z][a-z0-9_-]{1,39}$/);
    expect(manifest.snapshots.find((s: any) => s.node === `${PREFIX}1`)).toMatchObject({
      location: { node: 'pve1', vmid: '101' },
      sizeGiB: 32,
      details: { vmStatus: 'running', vmstate: false },
    });
    for (const vm of [fake.vm(101), fake.vm(102)]) expect(vm.snapshots.map((s) => s.name)).toEqual([name]);
    // Every call carried the token header; writes were form-encoded; each task was polled until it stopped.
    expect(fake.requests.every((q) => q.authorization === `PVEAPIToken=${TOKEN_ID}=${SECRET}`)).toBe(true);
    const creates = fake.requests.filter((q) => q.method === 'POST' && /\/qemu\/\d+\/snapshot$/.test(q.path));
    expect(creates).toHaveLength(2);
    for (const c of creates) {
      expect(c.contentType).toBe('application/x-www-form-urlencoded');
      const form = new URLSearchParams(c.body);
      expect(form.get('snapname')).toBe(name);
      expect(form.get('vmstate')).toBe('0');
      expect(form.get('description')).toMatch(new RegExp(`^cni-rewind bundle=${bundleId} cluster=\\S+ node=${PREFIX}\\d`));
    }
    const polls = fake.requests.filter((q) => /\/tasks\/UPID:pve[12]:[^/]+:qmsnapshot:10[12]:/.test(decodeURIComponent(q.path)) && q.path.endsWith('/status'));
    expect(polls).toHaveLength(2 * 3); // 2 x running, then stopped, per VM; polled on the node named in the UPID
    expect(polls.filter((q) => q.path.includes('/nodes/pve2/')).length).toBe(3);
  });

  it('snapshots list finds them by the description tags', async () => {
    const r = await cli(['snapshots', 'list', '--provider', 'proxmox', '--bundle', bundleId, '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    expect(
      JSON.parse(r.stdout)
        .map((s: any) => s.node)
        .sort(),
    ).toEqual([`${PREFIX}1`, `${PREFIX}2`]);
  });

  it('restore --disks rolls the VM back (start=1 as it was running) and waits for the task', async () => {
    fake.vm(101).data = 'written after the snapshot';
    fake.requests.length = 0;
    const host = new RecordingIoHost();
    const reporter = new Reporter(host);
    const saved = { ...process.env };
    Object.assign(process.env, env);
    const providers = providerSetFor({ providers: { proxmox: { caFile, pollIntervalMs: 50 } }, backup: {} }, reporter);
    try {
      const manifest = await readBundleManifest(bundlePath);
      const run = await restoreNodeDisks(
        client,
        manifest,
        providers,
        { nodes: [`${PREFIX}1`], concurrency: 1, drainTimeoutMs: 60_000, readyTimeoutMs: 60_000, mapping: emptyMapping() },
        reporter,
      );
      expect(run.outcomes, JSON.stringify(host.messages.filter((m) => m.level === 'error'))).toEqual([
        expect.objectContaining({ node: `${PREFIX}1`, state: 'done' }),
      ]);
    } finally {
      await providers.closeAll();
      process.env = saved;
    }
    const rollback = fake.requests.find((q) => q.method === 'POST' && q.path.endsWith('/rollback'))!;
    expect(rollback.path).toMatch(/^\/api2\/json\/nodes\/pve1\/qemu\/101\/snapshot\/cnr-[^/]+\/rollback$/);
    expect(new URLSearchParams(rollback.body).get('start')).toBe('1');
    expect(fake.vm(101).data).toBe('initial-101');
    expect(fake.vm(101).status).toBe('running');
  });

  it('a failed snapshot task: the backup is incomplete (exit 3) and names the task exit status', async () => {
    fake.failNext.set('qmsnapshot', "VM 102 qmp command 'savevm-start' failed - storage does not support snapshots");
    const r = await cli(['backup', '--provider', 'proxmox', '--nodes', `${PREFIX}2`, '--out', path.join(dir, 'b-fail'), '-o', 'json']);
    expect(r.code).toBe(3);
    expect(r.stdout + r.stderr).toContain(
      "Proxmox VE task qmsnapshot (snapshot of VM 102) failed: VM 102 qmp command 'savevm-start' failed - storage does not support snapshots",
    );
  });

  it('snapshots delete follows the delete tasks; a failing delete task is reported (exit 3), the retry succeeds', async () => {
    fake.failNext.set('qmdelsnapshot', 'lvremove failed: volume in use');
    const r1 = await cli(['snapshots', 'delete', '--provider', 'proxmox', '--bundle', bundleId, '--yes', '-o', 'json']);
    expect(r1.code).toBe(3);
    expect(r1.stdout + r1.stderr).toContain('lvremove failed: volume in use');
    const r2 = await cli(['snapshots', 'delete', '--provider', 'proxmox', '--bundle', bundleId, '--yes', '-o', 'json']);
    expect(r2.code, r2.stderr).toBe(0);
    expect(fake.vm(101).snapshots.filter((s) => s.description.includes(bundleId))).toEqual([]);
    expect(fake.vm(102).snapshots.filter((s) => s.description.includes(bundleId))).toEqual([]);
  });

  it('a rejected token: exit 4, one clear line, the secret never printed', async () => {
    const wrong = `${TOKEN_ID}=00000000-0000-0000-0000-000000000000`;
    const r = await cli(['snapshots', 'list', '--provider', 'proxmox', '--all-clusters'], { PROXMOX_VE_API_TOKEN: wrong });
    expect(r.code, r.stderr).toBe(4);
    expect(r.stderr).toContain('rejected the API token (HTTP 401 authentication failure)');
    expect(r.stderr).not.toContain('00000000-0000-0000-0000-000000000000');
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it('missing privileges (403) name the privileges needed', async () => {
    fake.forbid = true;
    try {
      const r = await cli(['snapshots', 'list', '--provider', 'proxmox', '--all-clusters']);
      expect(r.code).toBe(4);
      expect(r.stderr).toContain('permission denied');
      expect(r.stderr).toContain('VM.Snapshot');
    } finally {
      fake.forbid = false;
    }
  });

  it('TLS is verified: without the CA the call fails (exit 4) with a hint; insecure works and warns', async () => {
    const noCa = await runCli(['snapshots', 'list', '--provider', 'proxmox', '--all-clusters'], { env });
    expect(noCa.code).toBe(4);
    expect(noCa.stderr).toMatch(/Proxmox VE at 127\.0\.0\.1:\d+ is unreachable: .*(self[- ]signed|certificate)/i);
    expect(noCa.stderr).toContain('caFile');
    const insecure = await runCli(['snapshots', 'list', '--provider', 'proxmox', '--all-clusters', '-o', 'json'], {
      env: { ...env, PROXMOX_VE_INSECURE: 'true' },
    });
    expect(insecure.code, insecure.stderr).toBe(0);
    expect(insecure.stderr).toContain('TLS certificate verification is off');
  });

  it('a malformed token is refused with one line and is not echoed', async () => {
    // (snapshots list reports provider setup errors as exit 4; the provider itself throws BadInputError)
    const r = await cli(['snapshots', 'list', '--provider', 'proxmox', '--all-clusters'], { PROXMOX_VE_API_TOKEN: 'just-a-secret-value' });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('the API token is not of the form USER@REALM!TOKENID=SECRET');
    expect(r.stderr).not.toContain('just-a-secret-value');
  });
});
