import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../core/package-root.js';
import { BUNDLE_FORMAT_VERSION } from './format.js';
import { listBundles, selectForPrune } from './catalog.js';

const DAY = 86_400_000;
const now = Date.parse('2026-12-01T00:00:00Z');
const b = (daysAgo: number, complete = true) => ({ storedAt: new Date(now - daysAgo * DAY).toISOString(), complete, daysAgo });
const ages = (xs: { daysAgo: number }[]) => xs.map((x) => x.daysAgo);

describe('selectForPrune', () => {
  const list = [b(1), b(2, false), b(3), b(10), b(40), b(50)];
  it('--keep-last N keeps the N newest complete bundles and any incomplete one among them', async () => {
    const r = await selectForPrune(list, { keepLast: 2 }, { now });
    expect(ages(r.keep)).toEqual([1, 2, 3]);
    expect(ages(r.remove)).toEqual([10, 40, 50]);
  });
  it('--older-than removes only older bundles; with --keep-last both must hold', async () => {
    expect(ages((await selectForPrune(list, { olderThanMs: 30 * DAY }, { now })).remove)).toEqual([40, 50]);
    expect(ages((await selectForPrune(list, { olderThanMs: 45 * DAY, keepLast: 3 }, { now })).remove)).toEqual([50]);
    expect(ages((await selectForPrune(list, { olderThanMs: 2.5 * DAY, keepLast: 1 }, { now })).remove)).toEqual([3, 10, 40, 50]);
  });
  it('a bundle dated in the future by its storage, or one `counts` rejects, is kept but not counted among the N', async () => {
    const future = [b(-365), b(1), b(2), b(3)];
    expect(ages((await selectForPrune(future, { keepLast: 2 }, { now })).remove)).toEqual([3]);
    const rejected = await selectForPrune(list, { keepLast: 2 }, { now, counts: async (x) => x.daysAgo !== 1 });
    expect(ages(rejected.remove)).toEqual([40, 50]);
  });
});

describe('cni-rewind prune (built CLI)', () => {
  const cli = (args: string[]) =>
    spawnSync(process.execPath, [path.join(packageRoot(), 'dist', 'src', 'cli', 'main.js'), ...args], {
      encoding: 'utf8',
      env: { ...process.env, NO_COLOR: '1' },
    });
  it('--keep-last 2 leaves exactly the two newest bundles; --dry-run deletes nothing; not-bundles are left alone', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-prune-'));
    for (const [i, daysAgo] of [5, 1, 3, 9].entries()) {
      const d = path.join(dir, `bundle-${i}`);
      mkdirSync(d);
      const manifest = path.join(d, 'manifest.json');
      writeFileSync(
        manifest,
        JSON.stringify({
          formatVersion: BUNDLE_FORMAT_VERSION,
          id: `b${i}`,
          createdAt: new Date(Date.now() - daysAgo * DAY).toISOString(),
          cluster: { uid: 'u', name: 'c' },
          calico: {},
          counts: {},
          resources: [],
          files: {},
          notes: [],
          snapshots: [],
        }),
      );
      // Retention goes by the date the storage recorded (the manifest file's mtime), not the manifest's createdAt.
      const at = new Date(Date.now() - daysAgo * DAY);
      utimesSync(manifest, at, at);
    }
    mkdirSync(path.join(dir, 'notes'));
    const dry = cli(['prune', dir, '--keep-last', '2', '--dry-run', '-o', 'json']);
    expect(dry.status, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout).deleted.map((p: string) => path.basename(p))).toEqual(['bundle-0', 'bundle-3']);
    expect(readdirSync(dir)).toHaveLength(5);
    const real = cli(['prune', dir, '--keep-last', '2']);
    expect(real.status, real.stderr).toBe(0);
    expect(readdirSync(dir).sort()).toEqual(['bundle-1', 'bundle-2', 'notes']);
    expect(existsSync(path.join(dir, 'notes'))).toBe(true);
    const none = cli(['prune', dir]);
    expect(none.status).toBe(2);
    expect(none.stderr).toMatch(/prune needs --keep-last N, --older-than AGE or both/);
  });
});

describe('listBundles', () => {
  it('skips a FIFO in the backups folder instead of waiting on it', { timeout: 3000 }, async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-list-fifo-'));
    spawnSync('mkfifo', [path.join(dir, 'planted.tar.gz')]);
    const skipped: string[] = [];
    expect(await listBundles(dir, (p, why) => skipped.push(`${path.basename(p)}: ${why}`))).toEqual([]);
    expect(skipped).toEqual([expect.stringMatching(/^planted\.tar\.gz: .*is not a bundle/)]);
  });
});
