/**
 * Retention (`prune`): delete the bundles a rule selects and, when asked, the disk snapshots they recorded, through
 * the same provider plugins `snapshots delete` uses. A snapshot that a kept bundle still records is never deleted,
 * and a bundle whose snapshots could not all be deleted is kept: its manifest is the record of what is left.
 */
import { deleteBundle, listBundles, selectForPrune, type ListedBundle, type PruneRule } from '../bundle/catalog.js';
import { openBundle, readBundleManifest } from '../bundle/reader.js';
import { isRemote, newestStoredFirst, staleUploads, type OpenUpload } from '../bundle/remote.js';
import { verifyBundle } from '../bundle/verify.js';
import { BadInputError, errorMessage, EnvironmentError } from '../core/errors.js';
import type { Reporter } from '../io/host.js';
import type { ProviderSet } from '../providers/registry.js';
import type { SnapshotRecord } from '../provider-kit/types.js';
import { deleteSnapshots, listSnapshots } from './snapshots.js';

export interface PruneOptions extends PruneRule {
  dryRun: boolean;
  /** Also delete the snapshots each pruned bundle recorded, through these providers. */
  snapshots?: ProviderSet;
  /** s3:// only: abort the multipart uploads (bundles whose upload never completed) begun longer ago than this. */
  staleUploadMs: number;
}

export type PruneAction = 'deleted' | 'would delete' | 'kept' | 'kept (deletion failed)';

export interface PrunedBundle extends ListedBundle {
  action: PruneAction;
  /** With `snapshots`: the snapshot ids of this bundle that were (or would be) deleted. */
  snapshotIds?: string[];
}

export interface PruneResult {
  bundles: PrunedBundle[];
  /** One line per bundle that could not be deleted (it is kept), naming it and why. */
  failed: string[];
  /** With `snapshots`: snapshots a pruned bundle recorded that a kept bundle records too, left alone. */
  sharedWithKept: string[];
  /**
   * With `snapshots`: ids a pruned bundle records that no provider lists with this tool's tags for that bundle and
   * cluster (deleted already, or never made by cni-rewind: a planted manifest can name any snapshot). Never deleted.
   */
  notConfirmed: string[];
  /** s3://: open multipart uploads older than `staleUploadMs` that were (or, dry run, would be) aborted. */
  abortedUploads: OpenUpload[];
}

const snapshotKey = (r: Pick<SnapshotRecord, 'provider' | 'snapshotId'>) => `${r.provider}/${r.snapshotId}`;

/** The snapshot records of bundles (only those that have some are read: for s3:// that is a download each). */
async function recordsOf(b: ListedBundle): Promise<SnapshotRecord[]> {
  if (!b.snapshots) return [];
  return (await readBundleManifest(b.path)).snapshots ?? [];
}

/**
 * The snapshots of a pruned bundle its providers confirm as this tool's: listed by the provider itself with the
 * bundle's and cluster's tags. The manifest only names candidates: anyone who can write the backups location can
 * list any snapshot id there (a production database's), so the provider's own record, with the location it found
 * the snapshot at, is what gets deleted. Ids the providers do not confirm are returned to be named, never deleted.
 */
async function confirmedRecords(
  providers: ProviderSet,
  b: ListedBundle,
  records: SnapshotRecord[],
  reporter: Reporter,
): Promise<{ confirmed: SnapshotRecord[]; unconfirmed: string[] }> {
  if (!records.length) return { confirmed: [], unconfirmed: [] };
  const names = [...new Set(records.map((r) => r.provider))].sort();
  const { snapshots: listed } = await listSnapshots(providers, names, { bundleId: b.id, clusterId: b.clusterUid }, reporter);
  // Checked again here: a third-party provider may filter loosely.
  const tagged = new Map(listed.filter((l) => l.bundleId === b.id && l.clusterId === b.clusterUid).map((l) => [snapshotKey(l), l]));
  const confirmed: SnapshotRecord[] = [];
  const unconfirmed: string[] = [];
  for (const r of records) {
    const own = tagged.get(snapshotKey(r));
    if (own) confirmed.push(own);
    else unconfirmed.push(`${r.provider}/${r.snapshotId}`);
  }
  return { confirmed, unconfirmed };
}

/**
 * Whether a bundle may count as one of the N kept: it verifies (every file listed, none unlisted, checksums and
 * counts right, complete). A manifest planted on its own, or an object that only claims to be a bundle, does not,
 * and counting it would push a real backup out of the N.
 */
async function verifies(b: ListedBundle, reporter: Reporter): Promise<boolean> {
  let why: string;
  try {
    const bundle = await openBundle(b.path);
    try {
      const r = await verifyBundle(bundle);
      if (r.ok) return true;
      why = r.problems.map((p) => `${p.file}: ${p.problem}`).join('; ');
    } finally {
      await bundle.close();
    }
  } catch (err) {
    why = errorMessage(err);
  }
  reporter.warn('CNR_PRUNE_UNVERIFIED', `${b.path} does not verify, so it is not counted as one of the bundles to keep: ${why}`);
  return false;
}

export async function pruneBundles(dir: string, opts: PruneOptions, reporter: Reporter): Promise<PruneResult> {
  const listed = await listBundles(dir, (p, why) => reporter.debug('CNR_PRUNE_SKIP', `${p}: ${why}`)).catch((err) => {
    throw isRemote(dir) ? err : new BadInputError(`${dir}: no such directory`, { cause: err });
  });
  const { keep, remove } = await selectForPrune(listed, opts, { counts: (b) => verifies(b, reporter) });
  const out: PrunedBundle[] = keep.map((b) => ({ ...b, action: 'kept' }));
  const failed: string[] = [];
  const shared = new Set<string>();
  const notConfirmed: string[] = [];

  // Every snapshot a kept bundle records is off limits; not knowing them would make any deletion a guess.
  const keptSnapshots = new Set<string>();
  if (opts.snapshots) {
    for (const b of keep) {
      try {
        for (const r of await recordsOf(b)) keptSnapshots.add(snapshotKey(r));
      } catch (err) {
        throw new EnvironmentError(`cannot read the snapshot records of kept bundle ${b.path}: ${errorMessage(err)}; nothing was deleted`, { cause: err });
      }
    }
  }

  for (const b of remove) {
    const row: PrunedBundle = { ...b, action: opts.dryRun ? 'would delete' : 'deleted' };
    try {
      if (opts.snapshots) {
        const all = await recordsOf(b);
        for (const r of all) if (keptSnapshots.has(snapshotKey(r))) shared.add(r.snapshotId);
        const { confirmed: mine, unconfirmed } = await confirmedRecords(
          opts.snapshots,
          b,
          all.filter((r) => !keptSnapshots.has(snapshotKey(r))),
          reporter,
        );
        row.snapshotIds = mine.map((r) => r.snapshotId);
        if (unconfirmed.length) {
          notConfirmed.push(...unconfirmed);
          reporter.warn(
            'CNR_PRUNE_NOT_CONFIRMED',
            `${b.path}: not deleting ${unconfirmed.join(', ')}: no provider lists them with this tool's tags for bundle ${b.id} of cluster ${b.clusterUid} (deleted already, or not made by cni-rewind)`,
          );
        }
        if (!opts.dryRun && mine.length) {
          const res = await deleteSnapshots(opts.snapshots, mine, reporter);
          if (res.failures.length) throw new Error(`its snapshots could not all be deleted: ${res.failures.join('; ')}`);
          reporter.info('CNR_PRUNE_SNAPSHOTS', `${b.path}: deleted its ${mine.length} snapshot(s)`);
        }
      }
      if (!opts.dryRun) await deleteBundle(b.path);
    } catch (err) {
      row.action = 'kept (deletion failed)';
      failed.push(`${b.path}: ${errorMessage(err)}`);
      reporter.warn('CNR_PRUNE_FAILED', `${b.path} is kept: ${errorMessage(err)}`);
    }
    out.push(row);
  }
  out.sort(newestStoredFirst);
  let abortedUploads: OpenUpload[] = [];
  if (isRemote(dir)) {
    try {
      abortedUploads = await staleUploads(dir, new Date(Date.now() - opts.staleUploadMs), {
        abort: !opts.dryRun,
        onFailure: (u, why) => failed.push(`${u.url} (upload ${u.uploadId}): cannot abort it: ${why}`),
      });
    } catch (err) {
      // Credentials made for prune before it aborted uploads may lack s3:ListBucketMultipartUploads: the bundles
      // were pruned all the same, so this is a warning, not a failed run.
      reporter.warn(
        'CNR_PRUNE_UPLOADS',
        `${errorMessage(err)}; unfinished uploads are left (a bucket lifecycle rule AbortIncompleteMultipartUpload also cleans them up)`,
      );
    }
  }
  return { bundles: out, failed, sharedWithKept: [...shared], notConfirmed, abortedUploads };
}
