import { isRemote, writeRemote } from '../../bundle/remote.js';
import { BadInputError } from '../../errors.js';
import { ENCRYPTION_KEY_ENV, loadEncryptionKey } from '../../bundle/key.js';
import { defaultBundleName, exportBundle } from '../../export/export.js';
import { handler, type Command } from '../context.js';
import { renderTable } from '../output.js';

interface ExportArgs {
  out?: string;
  'exclude-secrets': boolean;
  encrypt: boolean;
  'encryption-key-file'?: string;
}

export const exportCommand: Command<ExportArgs> = {
  command: 'export',
  describe: 'Export every Calico resource (CRDs, custom resources, config, node annotations) to a checksummed bundle',
  builder: (y) =>
    y
      .option('out', { type: 'string', describe: 'bundle directory, a .tar.gz file, or s3://BUCKET/PREFIX[/NAME.tar.gz] (default ./cni-rewind-backups/<cluster>-<UTC time>/)' })
      .option('exclude-secrets', { type: 'boolean', default: false, describe: 'leave Secrets out of the bundle' })
      .option('encrypt', { type: 'boolean', default: false, describe: `encrypt Secret material at rest (AES-256-GCM) with the key from --encryption-key-file or $${ENCRYPTION_KEY_ENV}` })
      .option('encryption-key-file', { type: 'string', describe: 'file holding the 32-byte key (raw, 64 hex characters or base64)' }) as any,
  handler: handler<ExportArgs>(async (ctx, args) => {
    const encryptionKey = args.encrypt ? await loadEncryptionKey(args['encryption-key-file']) : undefined;
    if (args.encrypt && !encryptionKey) throw new BadInputError('--encrypt needs a key', { hint: `pass --encryption-key-file FILE or set ${ENCRYPTION_KEY_ENV} (openssl rand -hex 32)` });
    const client = await ctx.client();
    const run = (out: string | undefined) => exportBundle(client, { out, excludeSecrets: args['exclude-secrets'], encryptionKey }, ctx.reporter);
    const { path, manifest } = isRemote(args.out) ? await writeRemote(args.out, defaultBundleName(client.connection.clusterName), run) : await run(args.out);
    const objects = manifest.resources.reduce((s, r) => s + r.count, 0);
    ctx.print({ path, id: manifest.id, cluster: manifest.cluster, calico: manifest.calico, counts: manifest.counts, notes: manifest.notes }, () =>
      [
        `Bundle ${path}`,
        `${objects} Calico objects of ${manifest.resources.length} kinds, ${Object.keys(manifest.files).length} files`,
        ...manifest.notes.map((n) => `note: ${n}`),
        '',
        renderTable(
          manifest.resources.filter((r) => r.count > 0),
          [
            { header: 'resource', value: (r) => r.key },
            { header: 'count', value: (r) => r.count },
          ],
        ),
      ].join('\n'),
    );
  }),
};
