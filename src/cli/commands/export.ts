import { SignalScope } from '../signals.js';
import { isRemote, writeRemote } from '../../bundle/remote.js';
import { defaultBundleName, exportBundle } from '../../export/export.js';
import { handler, type Command } from '../context.js';
import { encryptionOptions, newBundleKey, type EncryptionArgs } from '../encryption.js';
import { renderTable } from '../output.js';

interface ExportArgs extends EncryptionArgs {
  out?: string;
  'exclude-secrets': boolean;
  encrypt: boolean;
}

export const exportCommand: Command<ExportArgs> = {
  command: 'export',
  describe: 'Export every Calico resource (CRDs, custom resources, config, node annotations) to a checksummed bundle',
  builder: (y) =>
    encryptionOptions(y)
      .option('out', {
        type: 'string',
        describe: 'bundle directory, a .tar.gz file, or s3://BUCKET/PREFIX[/NAME.tar.gz] (default ./cni-rewind-backups/<cluster>-<UTC time>/)',
      })
      .option('exclude-secrets', { type: 'boolean', default: false, describe: 'leave Secrets out of the bundle' })
      .option('encrypt', {
        type: 'boolean',
        default: false,
        describe: 'encrypt Secret material at rest (AES-256-GCM) with the key from --encryption-key-file, --encryption-passphrase-file or the environment',
      }) as any,
  handler: handler<ExportArgs>(async (ctx, args) => {
    const keyed = newBundleKey(ctx, args);
    const client = await ctx.client();
    // The bundle's notes are the human result's last lines: said there once, not also while exporting.
    if (args.output === 'table') ctx.host.hold(['CNR_EXPORT_V3_SKIPPED']);
    const { path, manifest } = await SignalScope.run(({ signal }) => {
      const run = (out: string | undefined) => exportBundle(client, { out, excludeSecrets: args['exclude-secrets'], ...keyed, signal }, ctx.reporter);
      return isRemote(args.out) ? writeRemote(args.out, defaultBundleName(client.connection.clusterName), run) : run(args.out);
    });
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
    ctx.host.dropHeld();
  }),
};
