/**
 * backup / snapshots / restore --disks with the GCP provider: the real @google-cloud/compute client (REST) against
 * test/fakes/gcp-compute-fake.ts, a FAKE of the Compute REST API on 127.0.0.1 (Google ships no emulator), and
 * the real test cluster whose kwok nodes carry gce:// providerIDs.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { providerSetFor } from '../../src/providers/session.js';
import { restoreNodeDisks } from '../../src/restore/disks.js';
import { readBundleManifest } from '../../src/bundle/reader.js';
import { loadConfig } from '../../src/config/config.js';
import { emptyMapping } from '../../src/config/mapping.js';
import { RecordingIoHost, Reporter } from '../../src/io/host.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { startGcpComputeFake, type GcpComputeFake } from '../fakes/gcp-compute-fake.js';
import { deleteNodes, runCli, testClient } from './helpers.js';

const PREFIX = 'cnr-gcp-';
const SELECTOR = 'cnr-test=gcp';
const ZONE = 'europe-west1-b';

describe('backup with the GCP Compute provider (against a local FAKE of the Compute REST API)', () => {
  let fake: GcpComputeFake;
  let client: KubeClient;
  let dir: string;
  let cfg: string;
  let bundlePath = '';
  let bundleId = '';
  const nodes = [1, 2].map((i) => `${PREFIX}${i}`);
  const cli = (args: string[]) => runCli([...args, '--config', cfg]);

  beforeAll(async () => {
    fake = await startGcpComputeFake();
    client = await testClient();
    await deleteNodes(client, PREFIX);
    dir = mkdtempSync(path.join(tmpdir(), 'cnr-gcp-'));
    cfg = path.join(dir, 'cni-rewind.yaml');
    writeFileSync(cfg, `providers:\n  gcp:\n    endpoint: ${fake.url}\n    auth: none\n    pollSeconds: 0.2\n`);
    for (const n of nodes)
      fake.addInstance(ZONE, n, [
        { deviceName: 'persistent-disk-0', boot: true, sizeGb: 20 },
        { deviceName: 'data-1', sizeGb: 50 },
      ]);
    await createFakeNodes(
      client,
      nodes.map((n) => ({ name: n, providerID: `gce://${fake.project}/${ZONE}/${n}`, labels: { 'cnr-test': 'gcp' } })),
    );
  });

  afterAll(async () => {
    await deleteNodes(client, PREFIX);
    client?.close();
    await fake?.close();
  });

  it('snapshots every attached disk with labels (guestFlush sent), waits for DONE and READY: bundle complete', async () => {
    bundlePath = path.join(dir, 'b1');
    fake.throttleNext = 3; // the first calls are rate limited (HTTP 429) and must be retried, not fail the backup
    const r = await cli(['backup', '--selector', SELECTOR, '--out', bundlePath, '--guest-flush', '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    expect(fake.throttleNext).toBe(0);
    const manifest = JSON.parse(readFileSync(path.join(bundlePath, 'manifest.json'), 'utf8'));
    bundleId = manifest.id;
    expect(manifest.complete).toBe(true);
    expect(manifest.snapshots).toHaveLength(4);
    for (const n of nodes) {
      const recs = manifest.snapshots.filter((s: any) => s.node === n);
      expect(recs.map((s: any) => [s.device, s.boot, s.disk, s.state]).sort()).toEqual([
        ['data-1', false, `${n}-data-1`, 'completed'],
        ['persistent-disk-0', true, `${n}-persistent-disk-0`, 'completed'],
      ]);
    }
    for (const rec of manifest.snapshots) {
      const snap = fake.snapshots.get(rec.snapshotId);
      expect(snap.status).toBe('READY');
      expect(snap._guestFlush).toBe(true);
      expect(snap.labels).toMatchObject({
        'cni-rewind': 'cni-rewind',
        'cni-rewind-bundle-id': bundleId.toLowerCase(),
        'cni-rewind-cluster-id': manifest.cluster.uid,
        'cni-rewind-node': rec.node,
        'cni-rewind-device': rec.device,
      });
    }
    // Each createSnapshot operation was waited on until DONE: the fake answers RUNNING first, so >= 2 waits each.
    const waits = fake.requests.filter((q) => q.method === 'POST' && /\/zones\/[^/]+\/operations\/[^/]+\/wait$/.test(q.path));
    expect(waits.length).toBeGreaterThanOrEqual(8);
    // No credentials were sent to the fake (auth: none), and the client is the real Google one.
    expect(fake.requests.every((q) => !q.headers.authorization)).toBe(true);
    expect(String(fake.requests.at(-1)!.headers['x-goog-api-client'])).toMatch(/gapic\/6\.15\.0/);
  });

  it('snapshots list finds them by label', async () => {
    const r = await cli(['snapshots', 'list', '--bundle', bundleId, '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const list = JSON.parse(r.stdout);
    expect(list).toHaveLength(4);
    expect(list.every((s: any) => s.provider === 'gcp' && s.state === 'completed')).toBe(true);
  });

  it('a FAILED snapshot fails the backup (exit 3) with the snapshots made recorded', async () => {
    fake.failSnapshotsOf.add(`${nodes[1]}-data-1`);
    try {
      const out = path.join(dir, 'b-fail');
      const r = await cli(['backup', '--selector', SELECTOR, '--out', out, '-o', 'json']);
      expect(r.code, r.stderr).toBe(3);
      expect(r.stderr).toMatch(/failed/);
      const manifest = JSON.parse(readFileSync(path.join(out, 'manifest.json'), 'utf8'));
      expect(manifest.complete).toBe(false);
      expect(manifest.snapshots).toHaveLength(4);
      expect(manifest.snapshots.filter((s: any) => s.state === 'failed').map((s: any) => s.disk)).toEqual([`${nodes[1]}-data-1`]);
      await cli(['snapshots', 'delete', '--bundle', manifest.id, '--yes']);
    } finally {
      fake.failSnapshotsOf.clear();
    }
  });

  it('restore --disks on one node: stop, new disks from the snapshots swapped in (boot as boot), start, uncordoned', async () => {
    const node = nodes[0]!;
    const host = new RecordingIoHost();
    const reporter = new Reporter(host);
    const providers = providerSetFor(await loadConfig(cfg), reporter);
    const manifest = await readBundleManifest(bundlePath);
    try {
      const run = await restoreNodeDisks(
        client,
        manifest,
        providers,
        { nodes: [node], concurrency: 1, drainTimeoutMs: 60_000, readyTimeoutMs: 60_000, mapping: emptyMapping() },
        reporter,
      );
      expect(run.outcomes).toEqual([expect.objectContaining({ node, state: 'done', cordoned: false })]);
    } finally {
      await providers.closeAll();
    }
    const inst = fake.instances.get(`${ZONE}/${node}`)!;
    expect(inst.status).toBe('RUNNING');
    const byDev = Object.fromEntries(inst.disks.map((d) => [d.deviceName, d]));
    expect(byDev['persistent-disk-0']!.boot).toBe(true);
    for (const dev of ['persistent-disk-0', 'data-1']) {
      const diskName = byDev[dev]!.source.split('/').pop()!;
      expect(diskName).not.toBe(`${node}-${dev}`);
      const rec = manifest.snapshots.find((s) => s.node === node && s.device === dev)!;
      expect(fake.disks.get(`${ZONE}/${diskName}`)!.sourceSnapshot).toMatch(new RegExp(`/global/snapshots/${rec.snapshotId}$`));
      // The replaced disk is kept.
      expect(fake.disks.has(`${ZONE}/${node}-${dev}`)).toBe(true);
    }
    const stops = fake.requests.filter((q) => q.path.endsWith(`/instances/${node}/stop`));
    expect(stops).toHaveLength(1);
    expect((await client.get(K.node, undefined, node)).spec?.unschedulable).toBeFalsy();
    // The other node is untouched.
    expect(fake.instances.get(`${ZONE}/${nodes[1]}`)!.disks.map((d) => d.source.split('/').pop())).toEqual([
      `${nodes[1]}-persistent-disk-0`,
      `${nodes[1]}-data-1`,
    ]);
  });

  it('restore --disks refuses (exit 5) before touching anything when a PodDisruptionBudget allows no disruption', async () => {
    const node = nodes[1]!;
    const ns = 'cnr-gcp-pdb';
    await client.delete(K.namespace, undefined, ns);
    await client.waitFor('namespace gone', async () => ((await client.getOrUndefined(K.namespace, undefined, ns)) ? undefined : true), { timeoutMs: 120_000 });
    await client.create(K.namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    try {
      await client.create(K.deployment, {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'db', namespace: ns },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: 'db' } },
          template: {
            metadata: { labels: { app: 'db' } },
            spec: { nodeSelector: { 'kubernetes.io/hostname': node }, containers: [{ name: 'c', image: 'registry.invalid/pause:1' }] },
          },
        },
      });
      await client.create(K.pdb, {
        apiVersion: 'policy/v1',
        kind: 'PodDisruptionBudget',
        metadata: { name: 'db', namespace: ns },
        spec: { minAvailable: 1, selector: { matchLabels: { app: 'db' } } },
      });
      await client.waitFor(
        'PDB db computed with 0 disruptions allowed',
        async () => {
          const p = await client.get(K.pdb, ns, 'db');
          return p.status?.currentHealthy === 1 && p.status?.disruptionsAllowed === 0 ? true : undefined;
        },
        { timeoutMs: 120_000 },
      );
      const requestsBefore = fake.requests.length;
      const r = await cli(['restore', bundlePath, '--disks', '--nodes', node, '--yes']);
      expect(r.code, r.stderr).toBe(5);
      expect(r.stderr).toMatch(new RegExp(`PodDisruptionBudget ${ns}/db allows 0 disruption`));
      expect(r.stderr).not.toMatch(/\n\s+at /);
      // Nothing was touched: the node is not cordoned, no instance call was made.
      expect((await client.get(K.node, undefined, node)).spec?.unschedulable).toBeFalsy();
      expect(fake.requests.slice(requestsBefore).filter((q) => q.method === 'POST')).toEqual([]);
      expect(fake.instances.get(`${ZONE}/${node}`)!.status).toBe('RUNNING');
    } finally {
      await client.delete(K.namespace, undefined, ns);
    }
  });

  it('snapshots delete --bundle removes them', async () => {
    const r = await cli(['snapshots', 'delete', '--bundle', bundleId, '--yes', '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).deleted).toBe(4);
    const list = await cli(['snapshots', 'list', '--bundle', bundleId, '-o', 'json']);
    expect(JSON.parse(list.stdout)).toEqual([]);
    expect([...fake.snapshots.values()].filter((s) => s.labels['cni-rewind-bundle-id'] === bundleId.toLowerCase())).toEqual([]);
  });

  it('a regional persistent disk is snapshotted and restored through the regional API, never looked up as zonal', async () => {
    const node = `${PREFIX}regional`;
    const region = 'europe-west1';
    fake.addInstance(ZONE, node, [
      { deviceName: 'persistent-disk-0', boot: true },
      { deviceName: 'shared', region },
    ]);
    await createFakeNodes(client, [{ name: node, providerID: `gce://${fake.project}/${ZONE}/${node}` }]);
    const out = path.join(dir, 'b-regional');
    const r = await cli(['backup', '--nodes', node, '--out', out, '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const manifest = JSON.parse(readFileSync(path.join(out, 'manifest.json'), 'utf8'));
    const rec = manifest.snapshots.find((s: any) => s.device === 'shared');
    expect(rec).toMatchObject({
      disk: `${node}-shared`,
      state: 'completed',
      location: { region },
      details: { replicaZones: [ZONE, expect.stringMatching(/^europe-west1-/)] },
    });
    const paths = fake.requests.map((q) => `${q.method} ${q.path.split('?')[0]}`);
    expect(paths).toContain(`POST /compute/v1/projects/${fake.project}/regions/${region}/disks/${node}-shared/createSnapshot`);
    expect(paths.some((p) => p.includes(`/zones/${ZONE}/disks/${node}-shared`))).toBe(false);
    const restored = await cli(['restore', out, '--disks', '--nodes', node, '--yes', '-o', 'json']);
    expect(restored.code, restored.stderr).toBe(0);
    const shared = fake.instances.get(`${ZONE}/${node}`)!.disks.find((d) => d.deviceName === 'shared')!;
    expect(shared.source).toMatch(new RegExp(`/regions/${region}/disks/`));
    expect(shared.source).not.toMatch(new RegExp(`/${node}-shared$`));
    const created = fake.disks.get(`regions/${region}/${shared.source.split('/').pop()}`)!;
    expect(created.sourceSnapshot).toMatch(new RegExp(`/global/snapshots/${rec.snapshotId}$`));
    expect(created.replicaZones).toHaveLength(2);
  });
});
