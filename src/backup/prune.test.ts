import { existsSync, mkdirSync, mkdtempSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { BUNDLE_FORMAT_VERSION } from '../bundle/format.js';
import { RecordingIoHost, Reporter } from '../io/host.js';
import { ProviderSet } from '../providers/registry.js';
import type { SnapshotFilter, SnapshotRecord } from '../provider-kit/types.js';
import { pruneBundles } from './prune.js';

const HOUR = 3_600_000;
const rec = (snapshotId: string, provider = 'fake'): SnapshotRecord => ({
  provider,
  node: 'n1',
  machine: 'm1',
  disk: 'd1',
  device: 'sda',
  snapshotId,
  state: 'completed',
  created: new Date().toISOString(),
});

/** Bundles `b0` (newest) .. `bN` in a temporary directory, each recording the given snapshot ids (of provider `fake`, or the records given). */
function bundles(snapshots: (string | SnapshotRecord)[][]): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-prune-snap-'));
  for (const [i, ids] of snapshots.entries()) {
    mkdirSync(path.join(dir, `b${i}`));
    const manifest = {
      formatVersion: BUNDLE_FORMAT_VERSION,
      id: `b${i}`,
      createdAt: new Date(Date.now() - (i + 1) * HOUR).toISOString(),
      cluster: { uid: 'u', name: 'c' },
      calico: {},
      counts: {},
      resources: [],
      files: {},
      notes: [],
      snapshots: ids.map((id) => (typeof id === 'string' ? rec(id) : id)),
      complete: true,
    };
    writeFileSync(path.join(dir, `b${i}`, 'manifest.json'), JSON.stringify(manifest));
    const storedAt = new Date(manifest.createdAt);
    utimesSync(path.join(dir, `b${i}`, 'manifest.json'), storedAt, storedAt);
  }
  return dir;
}

/**
 * A provider set with one provider, `fake`, that records what it is asked to delete and refuses `refuse`. It lists
 * every snapshot id of `made` as its own, tagged with the bundle id given there and cluster `u` (the test bundles').
 */
function fakeProviders(made: Record<string, string>, refuse = new Set<string>()) {
  const deleted: string[] = [];
  const provider = {
    async list(filter: SnapshotFilter) {
      return Object.entries(made)
        .filter(([, bundleId]) => !filter.bundleId || filter.bundleId === bundleId)
        .map(([id, bundleId]) => ({ ...rec(id), details: { bundleId, clusterId: 'u' } }));
    },
    async delete(records: SnapshotRecord[]) {
      const bad = records.filter((r) => refuse.has(r.snapshotId));
      deleted.push(...records.filter((r) => !refuse.has(r.snapshotId)).map((r) => r.snapshotId));
      if (bad.length) throw new Error(`not allowed to delete ${bad.map((r) => r.snapshotId).join(', ')}`);
    },
  };
  return { deleted, set: { get: async () => provider } as unknown as ProviderSet };
}

describe('pruneBundles with snapshots', () => {
  it('deletes the snapshots of pruned bundles, never one a kept bundle still records', async () => {
    const dir = bundles([['snap-shared', 'snap-new'], ['snap-shared', 'snap-old1'], ['snap-old2']]);
    const p = fakeProviders({ 'snap-shared': 'b0', 'snap-new': 'b0', 'snap-old1': 'b1', 'snap-old2': 'b2' });
    const r = await pruneBundles(dir, { keepLast: 1, dryRun: false, snapshots: p.set, staleUploadMs: 0 }, new Reporter(new RecordingIoHost()));
    expect(p.deleted.sort()).toEqual(['snap-old1', 'snap-old2']);
    expect(r.sharedWithKept).toEqual(['snap-shared']);
    expect(r.failed).toEqual([]);
    expect(r.bundles.map((b) => `${b.id} ${b.action}`)).toEqual(['b0 kept', 'b1 deleted', 'b2 deleted']);
    expect([0, 1, 2].map((i) => existsSync(path.join(dir, `b${i}`)))).toEqual([true, false, false]);
  });

  it('--dry-run deletes nothing and names the snapshots that would go', async () => {
    const dir = bundles([['s0'], ['s1'], ['s2']]);
    const p = fakeProviders({ s0: 'b0', s1: 'b1', s2: 'b2' });
    const r = await pruneBundles(dir, { keepLast: 2, dryRun: true, snapshots: p.set, staleUploadMs: 0 }, new Reporter(new RecordingIoHost()));
    expect(p.deleted).toEqual([]);
    expect(r.bundles.find((b) => b.id === 'b2')).toMatchObject({ action: 'would delete', snapshotIds: ['s2'] });
    expect(existsSync(path.join(dir, 'b2'))).toBe(true);
  });

  it('a bundle whose snapshots cannot all be deleted is kept and named; the others still go', async () => {
    const dir = bundles([['s0'], ['s1', 'stuck'], ['s2']]);
    const p = fakeProviders({ s0: 'b0', s1: 'b1', stuck: 'b1', s2: 'b2' }, new Set(['stuck']));
    const r = await pruneBundles(dir, { keepLast: 1, dryRun: false, snapshots: p.set, staleUploadMs: 0 }, new Reporter(new RecordingIoHost()));
    expect(r.failed).toEqual([expect.stringMatching(new RegExp(`^${path.join(dir, 'b1')}: .*stuck`))]);
    expect(r.bundles.map((b) => `${b.id} ${b.action}`)).toEqual(['b0 kept', 'b1 kept (deletion failed)', 'b2 deleted']);
    expect([0, 1, 2].map((i) => existsSync(path.join(dir, `b${i}`)))).toEqual([true, true, false]);
  });

  it('never loads a provider module a manifest names: the bundle is kept, named, and nothing ran', async () => {
    const flag = `cnrPrunePlanted${process.pid}`;
    const dir = bundles([['s0'], []]);
    const planted = path.join(dir, 'b1', 'evil.mjs');
    writeFileSync(planted, `globalThis.${flag} = 'file';`);
    const dataUrl = `data:text/javascript,globalThis.${flag}='data';export default {}`;
    const manifest = path.join(dir, 'b1', 'manifest.json');
    const m = JSON.parse(readFileSync(manifest, 'utf8'));
    m.snapshots = [rec('s-file', planted), rec('s-data', dataUrl)];
    writeFileSync(manifest, JSON.stringify(m));
    utimesSync(manifest, new Date(m.createdAt), new Date(m.createdAt));
    const reporter = new Reporter(new RecordingIoHost());
    const set = new ProviderSet(() => ({ reporter, config: {} }));
    const r = await pruneBundles(dir, { keepLast: 1, dryRun: false, snapshots: set, staleUploadMs: 0 }, reporter);
    expect((globalThis as Record<string, unknown>)[flag]).toBeUndefined();
    expect(r.bundles.map((b) => `${b.id} ${b.action}`)).toEqual(['b0 kept', 'b1 kept (deletion failed)']);
    expect(r.failed[0]).toContain('unknown provider');
    expect(existsSync(path.join(dir, 'b1'))).toBe(true);
  });

  it("deletes only snapshots the provider lists with the bundle and cluster tags: an untagged or other bundle's id is named, never deleted", async () => {
    const dir = bundles([['s0'], ['s1', 'prod-database'], ['s2', 's0-of-other'], ['s3']]);
    const p = fakeProviders({ s0: 'b0', s1: 'b1', s2: 'b2', 's0-of-other': 'b0', s3: 'b3' });
    const host = new RecordingIoHost();
    const r = await pruneBundles(dir, { keepLast: 1, dryRun: false, snapshots: p.set, staleUploadMs: 0 }, new Reporter(host));
    expect(p.deleted.sort()).toEqual(['s1', 's2', 's3']);
    expect(r.notConfirmed).toEqual(['fake/prod-database', 'fake/s0-of-other']);
    expect(r.bundles.map((b) => `${b.id} ${b.action}`)).toEqual(['b0 kept', 'b1 deleted', 'b2 deleted', 'b3 deleted']);
    expect(JSON.stringify(host.messages)).toMatch(/not deleting fake\/prod-database: no provider lists them with this tool's tags for bundle b1 of cluster u/);
  });
});

describe('pruneBundles retention trusts no date a bundle claims', () => {
  it('--keep-last counts by the stored date and only bundles that verify: planted manifests dated 2099 push out no real backup', async () => {
    const dir = bundles([[], [], []]);
    // A real bundle's manifest copied alone (its files are missing, so it does not verify), claiming 2099.
    mkdirSync(path.join(dir, 'planted-copy'));
    const real = JSON.parse(readFileSync(path.join(dir, 'b0', 'manifest.json'), 'utf8'));
    real.files = { 'crds/x.json': { size: 2, sha256: '0'.repeat(64) } };
    writeFileSync(path.join(dir, 'planted-copy', 'manifest.json'), JSON.stringify({ ...real, id: 'planted-copy', createdAt: '2099-01-01T00:00:00.000Z' }));
    // One that verifies (an empty bundle) but whose file was dated 2099 by hand.
    mkdirSync(path.join(dir, 'planted-future'));
    writeFileSync(path.join(dir, 'planted-future', 'manifest.json'), JSON.stringify({ ...real, files: {}, id: 'planted-future' }));
    const y2099 = new Date('2099-01-01T00:00:00Z');
    utimesSync(path.join(dir, 'planted-future', 'manifest.json'), y2099, y2099);
    const host = new RecordingIoHost();
    const r = await pruneBundles(dir, { keepLast: 2, dryRun: false, staleUploadMs: 0 }, new Reporter(host));
    expect(existsSync(path.join(dir, 'b0')) && existsSync(path.join(dir, 'b1'))).toBe(true);
    expect(r.bundles.filter((b) => b.action === 'deleted').map((b) => b.id)).toEqual(['b2']);
    expect(JSON.stringify(host.messages)).toMatch(/planted-copy does not verify, so it is not counted/);
  });
});
