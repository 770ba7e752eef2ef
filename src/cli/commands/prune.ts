import { deleteBundle, listBundles, selectForPrune } from '../../bundle/catalog.js';
import { isRemote } from '../../bundle/remote.js';
import { parseDuration } from '../../config/config.js';
import { BadInputError, PartialFailureError } from '../../errors.js';
import { DEFAULT_BACKUP_DIR } from '../../export/export.js';
import { handler, type Command } from '../context.js';
import { renderTable } from '../output.js';

interface PruneArgs {
  dir?: string;
  'keep-last'?: number;
  'older-than'?: string;
  'dry-run': boolean;
}

export const pruneCommand: Command<PruneArgs> = {
  command: 'prune [dir]',
  describe: `Delete old bundles under a directory (default ./${DEFAULT_BACKUP_DIR}): keep the newest N and/or those younger than an age`,
  builder: (y) =>
    y
      .positional('dir', { type: 'string', describe: 'directory holding bundles, or s3://BUCKET/PREFIX' })
      .option('keep-last', { type: 'number', describe: 'keep the N newest complete bundles' })
      .option('older-than', { type: 'string', describe: 'delete only bundles older than this (e.g. 30d, 12h)' })
      .option('dry-run', { type: 'boolean', default: false, describe: 'show what would be deleted; delete nothing' }) as any,
  handler: handler<PruneArgs>(async (ctx, args) => {
    const dir = args.dir ?? DEFAULT_BACKUP_DIR;
    const keepLast = args['keep-last'];
    if (keepLast === undefined && args['older-than'] === undefined) throw new BadInputError('prune needs --keep-last N, --older-than AGE or both');
    if (keepLast !== undefined && (!Number.isInteger(keepLast) || keepLast < 1)) throw new BadInputError(`--keep-last must be a whole number of at least 1, not ${keepLast}`);
    const olderThanMs = args['older-than'] === undefined ? undefined : parseDuration(args['older-than'], '--older-than');
    const bundles = await listBundles(dir, (p, why) => ctx.reporter.debug('CNR_PRUNE_SKIP', `${p}: ${why}`)).catch((err) => {
      throw isRemote(dir) ? err : new BadInputError(`${dir}: no such directory`, { cause: err });
    });
    const { keep, remove } = selectForPrune(bundles, { keepLast, olderThanMs });
    const failed: string[] = [];
    if (!args['dry-run']) {
      for (const b of remove) {
        try {
          await deleteBundle(b.path);
        } catch (err) {
          failed.push(`${b.path}: ${(err as Error).message}`);
        }
      }
    }
    const rows = [...remove.map((b) => ({ ...b, action: args['dry-run'] ? 'would delete' : 'deleted' })), ...keep.map((b) => ({ ...b, action: 'kept' }))];
    ctx.print({ dryRun: args['dry-run'], deleted: remove.map((b) => b.path), kept: keep.map((b) => b.path), failed }, () =>
      rows.length === 0 ? `no bundles under ${dir}` : renderTable(rows, [
        { header: 'action', value: (b) => b.action },
        { header: 'created', value: (b) => b.createdAt },
        { header: 'complete', value: (b) => (b.complete ? 'yes' : 'no') },
        { header: 'path', value: (b) => b.path },
      ]),
    );
    if (failed.length) throw new PartialFailureError(`${failed.length} of ${remove.length} bundles could not be deleted: ${failed[0]}`);
  }),
};
