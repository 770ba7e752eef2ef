import fs from 'node:fs/promises';
import path from 'node:path';
import { readBundleManifest } from './reader.js';
import { MANIFEST_FILE } from './paths.js';
import { deleteRemoteBundle, isRemote, listRemoteBundles, newestStoredFirst, type RemoteListed } from './remote.js';

/** A bundle found in a directory or under an s3:// prefix, with what `list` shows and `prune` decides on. */
export type ListedBundle = RemoteListed;

/**
 * Every bundle (folder or archive) directly under `dir`, newest first. Hidden entries (bundles still being written)
 * and entries that are not bundles are skipped; `onSkip` is told why.
 */
export async function listBundles(dir: string, onSkip?: (p: string, why: string) => void): Promise<ListedBundle[]> {
  if (isRemote(dir)) return listRemoteBundles(dir, onSkip);
  const out: ListedBundle[] = [];
  for (const e of (await fs.readdir(dir)).sort()) {
    if (e.startsWith('.')) continue;
    const p = path.join(dir, e);
    try {
      const m = await readBundleManifest(p);
      // A folder's manifest is written last, when the bundle is committed; an archive is one file.
      const stored = await fs.stat((await fs.stat(p)).isDirectory() ? path.join(p, MANIFEST_FILE) : p);
      out.push({
        path: p,
        id: m.id,
        createdAt: m.createdAt,
        storedAt: stored.mtime.toISOString(),
        cluster: m.cluster.name,
        clusterUid: m.cluster.uid,
        calico: m.calico?.version,
        objects: (m.resources ?? []).reduce((s, r) => s + (r.count ?? 0), 0),
        snapshots: m.snapshots.length,
        complete: m.complete,
      });
    } catch (err) {
      onSkip?.(p, (err as Error).message);
    }
  }
  return out.sort(newestStoredFirst);
}

/** Delete one bundle found by listBundles (a folder, an archive or an s3:// object). */
export async function deleteBundle(p: string): Promise<void> {
  if (isRemote(p)) return deleteRemoteBundle(p);
  await fs.rm(p, { recursive: true, force: true });
}

export interface PruneRule {
  /** Keep the N newest complete bundles (and any bundle newer than the oldest of them). */
  keepLast?: number;
  /** Only bundles older than this (ms) are removed. */
  olderThanMs?: number;
}

/** How far in the future a storage date may be (clock skew) and still count: a later one was set by hand. */
const FUTURE_SKEW_MS = 5 * 60_000;

export interface SelectOptions<B> {
  now?: number;
  /**
   * Whether a complete bundle may count toward the N kept (prune: it verifies). Asked only while fewer than N
   * are counted, newest first, so an s3:// prefix is not downloaded whole.
   */
  counts?: (b: B) => Promise<boolean>;
}

/**
 * Which bundles a retention rule removes. `bundles` must be newest first by `storedAt`: the date the storage
 * recorded, never one a manifest or object metadata claims (anyone who can write the backups location writes those,
 * and a bundle "from 2099" made every real one look old). With both rules, a bundle goes only when it is outside the
 * newest N and older than the age. Incomplete bundles, those `counts` rejects and those dated in the future never
 * count toward the N kept.
 */
export async function selectForPrune<B extends Pick<ListedBundle, 'storedAt' | 'complete'>>(
  bundles: B[],
  rule: PruneRule,
  opts: SelectOptions<B> = {},
): Promise<{ keep: B[]; remove: B[] }> {
  const now = opts.now ?? Date.now();
  const keep: B[] = [];
  const remove: B[] = [];
  let completeKept = 0;
  for (const b of bundles) {
    const storedAt = Date.parse(b.storedAt);
    const withinLast = rule.keepLast === undefined || completeKept < rule.keepLast;
    const young = rule.olderThanMs !== undefined && now - storedAt <= rule.olderThanMs;
    const byCount = rule.keepLast !== undefined && withinLast;
    if (byCount || young || (rule.keepLast === undefined && rule.olderThanMs === undefined)) {
      keep.push(b);
      if (b.complete && storedAt <= now + FUTURE_SKEW_MS && (!byCount || !opts.counts || (await opts.counts(b)))) completeKept++;
    } else {
      remove.push(b);
    }
  }
  return { keep, remove };
}
