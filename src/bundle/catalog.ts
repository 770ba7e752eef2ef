import fs from 'node:fs/promises';
import path from 'node:path';
import { readBundleManifest } from './reader.js';
import { deleteRemoteBundle, isRemote, listRemoteBundles, type RemoteListed } from './remote.js';

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
      out.push({
        path: p,
        id: m.id,
        createdAt: m.createdAt,
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
  return out.sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0));
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

/**
 * Which bundles a retention rule removes. `bundles` must be newest first. With both rules, a bundle goes only when
 * it is outside the newest N and older than the age. Incomplete bundles never count toward the N kept.
 */
export function selectForPrune<B extends Pick<ListedBundle, 'createdAt' | 'complete'>>(
  bundles: B[],
  rule: PruneRule,
  now = Date.now(),
): { keep: B[]; remove: B[] } {
  const keep: B[] = [];
  const remove: B[] = [];
  let completeKept = 0;
  for (const b of bundles) {
    const withinLast = rule.keepLast === undefined || completeKept < rule.keepLast;
    const young = rule.olderThanMs !== undefined && now - Date.parse(b.createdAt) <= rule.olderThanMs;
    const byCount = rule.keepLast !== undefined && withinLast;
    if (byCount || young || (rule.keepLast === undefined && rule.olderThanMs === undefined)) {
      keep.push(b);
      if (b.complete) completeKept++;
    } else {
      remove.push(b);
    }
  }
  return { keep, remove };
}
