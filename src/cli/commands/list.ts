import { listBundles, type ListedBundle } from '../../bundle/catalog.js';
import { isRemote } from '../../bundle/remote.js';
import { BadInputError } from '../../core/errors.js';
import { DEFAULT_BACKUP_DIR } from '../../export/export.js';
import { handler, type Command } from '../context.js';
import { renderTable } from '../output.js';

interface ListArgs {
  dir?: string;
}

export const listCommand: Command<ListArgs> = {
  command: 'list [dir]',
  describe: `List bundles under a directory (default ./${DEFAULT_BACKUP_DIR}), newest first`,
  builder: (y) => y.positional('dir', { type: 'string', describe: 'directory holding bundles, or s3://BUCKET/PREFIX' }) as any,
  handler: handler<ListArgs>(async (ctx, args) => {
    const dir = args.dir ?? DEFAULT_BACKUP_DIR;
    let out: ListedBundle[] = [];
    try {
      out = await listBundles(dir, (p, why) => ctx.reporter.debug('CNR_LIST_SKIP', `${p}: ${why}`));
    } catch (err) {
      if (isRemote(dir)) throw err;
      if (args.dir) throw new BadInputError(`${dir}: no such directory`);
    }
    // Shown newest first by the CREATED date the table shows (ties by path, so copies list in a stable order). prune
    // does not go by this order: it decides by the date the storage recorded (catalog.ts, prune.ts).
    out = [...out].sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : a.path.localeCompare(b.path)));
    ctx.print(out, () =>
      out.length === 0
        ? `no bundles under ${dir}`
        : renderTable(out, [
            { header: 'created', value: (b) => b.createdAt },
            { header: 'cluster', value: (b) => b.cluster },
            { header: 'calico', value: (b) => b.calico ?? '-' },
            { header: 'objects', value: (b) => b.objects },
            { header: 'snapshots', value: (b) => b.snapshots },
            { header: 'complete', value: (b) => (b.complete ? 'yes' : 'no') },
            { header: 'path', value: (b) => b.path },
          ]),
    );
  }),
};
