/**
 * backup / snapshots list / restore --disks / snapshots delete with the Azure provider, through the built CLI: the
 * real @azure/arm-compute client and DefaultAzureCredential against test/fakes/azure-arm-fake.ts, a FAKE of the
 * ARM Compute REST API on 127.0.0.1 (Microsoft ships no compute emulator), and the real test cluster whose kwok
 * nodes carry azure:/// providerIDs: two VMs and one uniform scale set instance. The fake throttles (429 +
 * Retry-After) and its long-running operations take several Azure-AsyncOperation polls.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { ResourceType } from '../../src/kube/types.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { startAzureArmFake, type AzureArmFake, type FakeMachine } from '../fakes/azure-arm-fake.js';
import { deleteNodes, runCli, testClient } from './helpers.js';

const PREFIX = 'cnr-az-';
const SELECTOR = 'cnr-test=azure';
const RG = 'mc_rg-cnr_aks-cnr_westeurope';
const PV = 'cnr-az-pv-data';
const PV_TYPE: ResourceType = { group: '', version: 'v1', plural: 'persistentvolumes', kind: 'PersistentVolume', namespaced: false };

describe('backup and restore with the Azure provider (against a local FAKE of the ARM Compute REST API)', () => {
  let fake: AzureArmFake;
  let client: KubeClient;
  let dir: string;
  let cfg: string;
  let bundlePath = '';
  let bundleId = '';
  let env: Record<string, string>;
  const nodes = { vm1: `${PREFIX}vm1`, vm2: `${PREFIX}vm2`, ss: `${PREFIX}vmss-0` };
  const machines: Record<string, FakeMachine> = {};
  const cli = (args: string[]) => runCli([...args, '--config', cfg], { env });
  const osDiskOf = (m: FakeMachine): string => m.json.properties.storageProfile.osDisk.managedDisk.id;
  const dataDiskOf = (m: FakeMachine, lun: number): string => m.json.properties.storageProfile.dataDisks.find((d: any) => d.lun === lun).managedDisk.id;
  const noSecrets = (out: string) => expect(out).not.toContain(fake.token);

  beforeAll(async () => {
    fake = await startAzureArmFake();
    env = {
      ...fake.credentialEnv,
      HTTPS_PROXY: '',
      https_proxy: '',
      HTTP_PROXY: '',
      http_proxy: '',
      AZURE_CLIENT_ID: '',
      AZURE_CLIENT_SECRET: '',
      AZURE_TENANT_ID: '',
    };
    client = await testClient();
    await deleteNodes(client, PREFIX);
    await client.delete(PV_TYPE, undefined, PV).catch(() => undefined);
    dir = mkdtempSync(path.join(tmpdir(), 'cnr-azure-'));
    cfg = path.join(dir, 'cni-rewind.yaml');
    writeFileSync(cfg, `providers:\n  azure:\n    endpoint: ${fake.url}\n    pollSeconds: 0.2\n`);
    machines.vm1 = fake.addVm(RG, nodes.vm1, [0, 1], { zone: '1' });
    machines.vm2 = fake.addVm(RG, nodes.vm2, [0]);
    machines.ss = fake.addVmssInstance(RG, 'aks-pool-vmss', '0', [0]);
    // vm1's lun 1 is an Azure Disk CSI PersistentVolume: matched by its volumeHandle, the disk's resource id.
    await client.create(PV_TYPE, {
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: { name: PV },
      spec: {
        capacity: { storage: '64Gi' },
        accessModes: ['ReadWriteOnce'],
        persistentVolumeReclaimPolicy: 'Retain',
        csi: { driver: 'disk.csi.azure.com', volumeHandle: dataDiskOf(machines.vm1!, 1).toLowerCase() },
      },
    });
    const sub = fake.subscription;
    await createFakeNodes(client, [
      {
        name: nodes.vm1,
        providerID: `azure:///subscriptions/${sub}/resourceGroups/${RG}/providers/Microsoft.Compute/virtualMachines/${nodes.vm1}`,
        labels: { 'cnr-test': 'azure' },
      },
      {
        name: nodes.vm2,
        providerID: `azure:///subscriptions/${sub}/resourceGroups/${RG}/providers/Microsoft.Compute/virtualMachines/${nodes.vm2}`,
        labels: { 'cnr-test': 'azure' },
      },
      {
        name: nodes.ss,
        providerID: `azure:///subscriptions/${sub}/resourceGroups/${RG}/providers/Microsoft.Compute/virtualMachineScaleSets/aks-pool-vmss/virtualMachines/0`,
        labels: { 'cnr-test': 'azure' },
      },
    ]);
  });

  afterAll(async () => {
    await deleteNodes(client, PREFIX);
    await client?.delete(PV_TYPE, undefined, PV).catch(() => undefined);
    client?.close();
    await fake?.close();
  });

  it('backup: OS and data disks of two VMs and a scale set instance, incremental and tagged; the PV disk skipped; throttling and multi-poll LROs absorbed', async () => {
    bundlePath = path.join(dir, 'b1');
    fake.throttleNext = 3;
    const r = await cli(['backup', '--selector', SELECTOR, '--out', bundlePath, '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    noSecrets(r.stdout + r.stderr);
    expect(fake.throttleNext).toBe(0);
    expect(fake.requests.filter((q) => q.status === 429)).toHaveLength(3);
    const manifest = JSON.parse(readFileSync(path.join(bundlePath, 'manifest.json'), 'utf8'));
    bundleId = manifest.id;
    expect(manifest.complete).toBe(true);
    const got = manifest.snapshots.map((s: any) => `${s.node} ${s.device} ${s.state}`).sort();
    expect(got).toEqual(
      [
        `${nodes.vm1} lun-0 completed`,
        `${nodes.vm1} os completed`,
        `${nodes.vm2} lun-0 completed`,
        `${nodes.vm2} os completed`,
        `${nodes.ss} lun-0 completed`,
        `${nodes.ss} os completed`,
      ].sort(),
    );
    expect(manifest.skippedDisks).toEqual([expect.objectContaining({ node: nodes.vm1, device: 'lun-1', pv: PV, disk: dataDiskOf(machines.vm1!, 1) })]);
    for (const rec of manifest.snapshots) {
      const snap = fake.snapshots.get(rec.snapshotId.toLowerCase())!;
      expect(snap.properties).toMatchObject({
        incremental: true,
        provisioningState: 'Succeeded',
        completionPercent: 100,
        creationData: { createOption: 'Copy', sourceResourceId: rec.disk },
      });
      expect(snap.tags).toMatchObject({
        'cni-rewind': 'cni-rewind',
        'cni-rewind-bundle-id': bundleId,
        'cni-rewind-cluster-id': manifest.cluster.uid,
        'cni-rewind-node': rec.node,
        'cni-rewind-device': rec.device,
      });
    }
    // Every snapshot PUT was a long-running operation polled until Succeeded (InProgress on the first polls).
    const polls = fake.requests.filter((q) => /\/operations\/[^/]+$/.test(q.path));
    expect(polls.length).toBeGreaterThanOrEqual(6 * fake.pollsPerOperation);
    expect(fake.requests.every((q) => q.path === '/msi/token' || q.query.get('api-version'))).toBe(true);
  });

  it('--include-volumes adds the PersistentVolume disk, recorded with its PV', async () => {
    const out = path.join(dir, 'b-vol');
    const r = await cli(['backup', '--nodes', nodes.vm1, '--include-volumes', '--out', out, '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const manifest = JSON.parse(readFileSync(path.join(out, 'manifest.json'), 'utf8'));
    expect(manifest.snapshots.find((s: any) => s.device === 'lun-1')).toMatchObject({ pv: PV, state: 'completed' });
    const del = await cli(['snapshots', 'delete', '--bundle', manifest.id, '--yes', '-o', 'json']);
    expect(del.code, del.stderr).toBe(0);
    expect(JSON.parse(del.stdout).deleted).toBe(3);
  });

  it('snapshots list finds them by tag (across pages of the subscription listing)', async () => {
    const r = await cli(['snapshots', 'list', '--bundle', bundleId, '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const list = JSON.parse(r.stdout);
    expect(list).toHaveLength(6);
    expect(list.every((s: any) => s.provider === 'azure' && s.state === 'completed' && s.bundleId === bundleId)).toBe(true);
    expect(fake.requests.some((q) => q.query.get('$skiptoken'))).toBe(true);
  });

  it('restore --disks: new disks from the snapshots, machines deallocated, OS and data disks swapped, started; the PV disk untouched', async () => {
    const before = Object.fromEntries(Object.entries(machines).map(([k, m]) => [k, { os: osDiskOf(m), lun0: dataDiskOf(m, 0) }]));
    const pvDisk = dataDiskOf(machines.vm1!, 1);
    const reqStart = fake.requests.length;
    fake.throttleNext = 1;
    const r = await cli(['restore', bundlePath, '--disks', '--yes', '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    noSecrets(r.stdout + r.stderr);
    const run = JSON.parse(r.stdout);
    expect(run.outcomes.map((o: any) => `${o.node} ${o.state}`).sort()).toEqual(
      Object.values(nodes)
        .map((n) => `${n} done`)
        .sort(),
    );
    const manifest = JSON.parse(readFileSync(path.join(bundlePath, 'manifest.json'), 'utf8'));
    for (const [k, m] of Object.entries(machines)) {
      expect(m.power).toBe('running');
      for (const [dev, now, old] of [
        ['os', osDiskOf(m), before[k]!.os],
        ['lun-0', dataDiskOf(m, 0), before[k]!.lun0],
      ] as const) {
        expect(now).not.toBe(old);
        const rec = manifest.snapshots.find((s: any) => s.machine.toLowerCase() === m.id.toLowerCase() && s.device === dev);
        expect(fake.disks.get(now.toLowerCase())!.properties.creationData.sourceResourceId).toBe(rec.snapshotId);
        expect(fake.disks.has(old.toLowerCase())).toBe(true); // replaced disks are kept
      }
    }
    expect(dataDiskOf(machines.vm1!, 1)).toBe(pvDisk);
    expect(machines.vm1!.json.zones).toEqual(['1']);
    expect(fake.disks.get(osDiskOf(machines.vm1!).toLowerCase())!.zones).toEqual(['1']);
    // Per machine: deallocate, then the disk swap, then start.
    const calls = fake.requests.slice(reqStart).map((q) => `${q.method} ${q.path}`);
    for (const m of Object.values(machines)) {
      const i = (s: string) => calls.indexOf(s);
      expect(i(`POST ${m.id}/deallocate`)).toBeGreaterThan(-1);
      expect(i(`${m.id.includes('virtualMachineScaleSets') ? 'PUT' : 'PATCH'} ${m.id}`)).toBeGreaterThan(i(`POST ${m.id}/deallocate`));
      expect(i(`POST ${m.id}/start`)).toBeGreaterThan(i(`${m.id.includes('virtualMachineScaleSets') ? 'PUT' : 'PATCH'} ${m.id}`));
    }
    for (const n of Object.values(nodes)) expect((await client.get(K.node, undefined, n)).spec?.unschedulable).toBeFalsy();
  });

  it('restore --disks refuses (exit 5), naming the disk, when a recorded device now holds another disk', async () => {
    const m = machines.vm2!;
    const foreign = fake.diskId(RG, 'hand-attached-disk');
    fake.disks.set(foreign.toLowerCase(), {
      id: foreign,
      name: 'hand-attached-disk',
      location: 'westeurope',
      properties: { diskSizeGB: 64, creationData: { createOption: 'Empty' }, provisioningState: 'Succeeded' },
    });
    const slot = m.json.properties.storageProfile.dataDisks.find((d: any) => d.lun === 0);
    slot.managedDisk.id = foreign;
    const reqStart = fake.requests.length;
    const r = await cli(['restore', bundlePath, '--disks', '--nodes', nodes.vm2, '--yes']);
    expect(r.code, r.stderr).toBe(5);
    expect(r.stderr).toContain(foreign);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(fake.requests.slice(reqStart).filter((q) => q.method !== 'GET' && q.path !== '/msi/token')).toEqual([]);
    expect(m.power).toBe('running');
  });

  it('snapshots delete --bundle removes them (long-running deletes)', async () => {
    const r = await cli(['snapshots', 'delete', '--bundle', bundleId, '--yes', '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).deleted).toBe(6);
    expect([...fake.snapshots.values()].filter((s) => s.tags['cni-rewind-bundle-id'] === bundleId)).toEqual([]);
    const list = await cli(['snapshots', 'list', '--bundle', bundleId, '-o', 'json']);
    expect(JSON.parse(list.stdout)).toEqual([]);
  });
});
