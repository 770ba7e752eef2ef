/**
 * Pieces the cloud providers share: tag/label names for clouds whose keys may not contain `/` (GCE labels, Azure
 * tags), deleting snapshots one by one with the failures gathered into one error, and the error waitUsable throws
 * when some snapshots did not become usable.
 */
import { EnvironmentError, errorMessage } from '../core/errors.js';
import type { SnapshotRecord } from './types.js';

/** The shared tag keys (types.ts TAG_KEYS) with `-` for `/`, plus the keys the cloud providers add. */
export const FLAT_TAG_KEYS = {
  tool: 'cni-rewind',
  bundle: 'cni-rewind-bundle-id',
  cluster: 'cni-rewind-cluster-id',
  node: 'cni-rewind-node',
  machine: 'cni-rewind-machine',
  device: 'cni-rewind-device',
  boot: 'cni-rewind-boot',
  restoredBy: 'cni-rewind-restored-by-run',
} as const;

/** Delete every record in parallel; an already deleted snapshot is not an error; the others are named in one error. */
export async function deleteEach(
  provider: string,
  records: SnapshotRecord[],
  del: (r: SnapshotRecord) => Promise<void>,
  isNotFound: (err: unknown) => boolean,
): Promise<void> {
  const failures: string[] = [];
  await Promise.all(
    records.map(async (r) => {
      try {
        await del(r);
      } catch (err) {
        if (!isNotFound(err)) failures.push(`${r.snapshotId}: ${errorMessage(err)}`);
      }
    }),
  );
  if (failures.length) throw new EnvironmentError(`${provider}: ${failures.length} snapshot(s) could not be deleted: ${failures.slice(0, 5).join('; ')}`);
}

/** Throw when some waited-on records are not `completed`: the failed ones named, else the ones still pending; the records ride along. */
export function throwUnlessUsable(
  provider: string,
  out: SnapshotRecord[],
  opts: { timeoutMs: number; name?: (r: SnapshotRecord) => string; readyWord?: string },
): void {
  const bad = out.filter((r) => r.state !== 'completed');
  if (!bad.length) return;
  const name = opts.name ?? ((r: SnapshotRecord) => r.snapshotId);
  const failed = bad.filter((r) => r.state === 'failed');
  const what = failed.length
    ? `snapshot(s) ${failed.map((r) => `${name(r)} (${r.device})`).join(', ')} failed`
    : `snapshot(s) ${bad.map(name).join(', ')} not ${opts.readyWord ?? 'complete'} after ${Math.round(opts.timeoutMs / 1000)} s`;
  throw Object.assign(new EnvironmentError(`${provider} ${what}`), { records: out });
}
