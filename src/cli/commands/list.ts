import fs from 'node:fs/promises';
import path from 'node:path';
import { readBundleManifest } from '../../bundle/reader.js';
import { BadInputError } from '../../errors.js';
import { DEFAULT_BACKUP_DIR } from '../../export/export.js';
import { handler, type Command } from '../context.js';
import { renderTable } from '../output.js';

interface ListArgs {
  dir?: string;
}

interface ListedBundle {
  path: string;
  id: string;
  createdAt: string;
  cluster: string;
  clusterUid: string;
  calico?: string;
  objects: number;
  snapshots: number;
  complete: boolean;
}

export const listCommand: Command<ListArgs> = {
  command: 'list [dir]',
  describe: `List bundles under a directory (default ./${DEFAULT_BACKUP_DIR}), newest first`,
  builder: (y) => y.positional('dir', { type: 'string', describe: 'directory holding bundles' }) as any,
  handler: handler<ListArgs>(async (ctx, args) => {
    const dir = args.dir ?? DEFAULT_BACKUP_DIR;
    let entries: string[] = [];
    try {
      entries = await fs.readdir(dir);
    } catch (err) {
      if (args.dir) throw new BadInputError(`${dir}: no such directory`);
      entries = [];
    }
    const out: ListedBundle[] = [];
    for (const e of entries.sort()) {
      // Hidden entries are bundles still being written (or left by an interrupted export).
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
        ctx.reporter.debug('CNR_LIST_SKIP', `${p}: ${(err as Error).message}`);
      }
    }
    out.sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0));
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
