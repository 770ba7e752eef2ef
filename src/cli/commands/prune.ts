import { pruneBundles } from '../../backup/prune.js';
import { isRemote } from '../../bundle/remote.js';
import { parseDuration, type CniRewindConfig } from '../../config/config.js';
import { BadInputError, PartialFailureError } from '../../core/errors.js';
import { DEFAULT_BACKUP_DIR } from '../../export/export.js';
import type { ProviderSet } from '../../providers/registry.js';
import { loadProviderSettings, withProviders } from '../../providers/session.js';
import { handler, type Command } from '../context.js';
import { renderTable } from '../output.js';

interface PruneArgs {
  dir?: string;
  'keep-last'?: number;
  'older-than'?: string;
  'dry-run': boolean;
  snapshots: boolean;
  'abort-uploads-older-than': string;
  config?: string;
  providerModule?: string[];
}

export const pruneCommand: Command<PruneArgs> = {
  command: 'prune [dir]',
  describe: `Delete old bundles under a directory (default ./${DEFAULT_BACKUP_DIR}): keep the newest N and/or those younger than an age`,
  builder: (y) =>
    y
      .positional('dir', { type: 'string', describe: 'directory holding bundles, or s3://BUCKET/PREFIX' })
      .option('keep-last', { type: 'number', describe: 'keep the N newest complete bundles' })
      .option('older-than', { type: 'string', describe: 'delete only bundles older than this (e.g. 30d, 12h)' })
      .option('snapshots', {
        type: 'boolean',
        default: false,
        describe: 'also delete the disk snapshots each deleted bundle recorded (never one a kept bundle records)',
      })
      .option('abort-uploads-older-than', {
        type: 'string',
        default: '24h',
        describe: 's3:// only: abort the multipart uploads begun longer ago than this that never completed (bundles whose upload was killed)',
      })
      .option('config', { type: 'string', describe: 'cni-rewind config file (provider settings for --snapshots)' })
      .option('provider-module', { type: 'string', array: true, describe: 'load a third-party provider module for --snapshots; repeatable' })
      .option('dry-run', { type: 'boolean', default: false, describe: 'show what would be deleted; delete nothing' }) as any,
  handler: handler<PruneArgs>(async (ctx, args) => {
    const dir = args.dir ?? DEFAULT_BACKUP_DIR;
    const keepLast = args['keep-last'];
    if (keepLast === undefined && args['older-than'] === undefined) throw new BadInputError('prune needs --keep-last N, --older-than AGE or both');
    if (keepLast !== undefined && (!Number.isInteger(keepLast) || keepLast < 1))
      throw new BadInputError(`--keep-last must be a whole number of at least 1, not ${keepLast}`);
    const olderThanMs = args['older-than'] === undefined ? undefined : parseDuration(args['older-than'], '--older-than');
    let config: CniRewindConfig | undefined;
    if (args.snapshots) {
      config = (await loadProviderSettings({ config: args.config })).config;
    } else if (args.config || args.providerModule?.length) {
      throw new BadInputError('--config and --provider-module are for --snapshots');
    }
    const dryRun = args['dry-run'];
    const staleUploadMs = parseDuration(args['abort-uploads-older-than'], '--abort-uploads-older-than');
    const prune = (snapshots?: ProviderSet) => pruneBundles(dir, { keepLast, olderThanMs, dryRun, snapshots, staleUploadMs }, ctx.reporter);
    const res = config ? await withProviders({ config, modules: args.providerModule }, ctx.reporter, prune) : await prune();
    const removed = res.bundles.filter((b) => b.action === 'deleted' || b.action === 'would delete');
    const snapshotIds = removed.flatMap((b) => b.snapshotIds ?? []);
    ctx.print(
      {
        dryRun,
        deleted: removed.map((b) => b.path),
        kept: res.bundles.filter((b) => b.action.startsWith('kept')).map((b) => b.path),
        failed: res.failed,
        ...(res.abortedUploads.length || isRemote(dir) ? { [dryRun ? 'wouldAbortUploads' : 'abortedUploads']: res.abortedUploads } : {}),
        ...(args.snapshots
          ? { snapshots: { [dryRun ? 'wouldDelete' : 'deleted']: snapshotIds, sharedWithKept: res.sharedWithKept, notConfirmed: res.notConfirmed } }
          : {}),
      },
      () => {
        if (!res.bundles.length && !res.abortedUploads.length) return `no bundles under ${dir}`;
        const table = renderTable(res.bundles, [
          { header: 'action', value: (b) => b.action },
          { header: 'created', value: (b) => b.createdAt },
          { header: 'complete', value: (b) => (b.complete ? 'yes' : 'no') },
          ...(args.snapshots
            ? [{ header: 'snapshots', value: (b: (typeof res.bundles)[number]) => (b.snapshotIds ? b.snapshotIds.join(' ') || '-' : '') }]
            : []),
          { header: 'path', value: (b) => b.path },
        ]);
        const shared = res.sharedWithKept.length ? `\nleft alone (a kept bundle records them too): ${res.sharedWithKept.join(' ')}` : '';
        const notConfirmed = res.notConfirmed.length
          ? `\nleft alone (no provider lists them with this tool's tags for their bundle): ${res.notConfirmed.join(' ')}`
          : '';
        const uploads = res.abortedUploads
          .map((u) => `\n${dryRun ? 'would abort' : 'aborted'} the unfinished upload of ${u.url} (begun ${u.initiated})`)
          .join('');
        return table + shared + notConfirmed + uploads;
      },
    );
    if (res.failed.length) throw new PartialFailureError(`${res.failed.length} bundle(s) or upload(s) could not be deleted: ${res.failed[0]}`);
  }),
};
