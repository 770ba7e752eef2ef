import { SignalScope } from '../signals.js';
import { isRemote, writeRemote } from '../../bundle/remote.js';
import { defaultBundleName, exportBundle } from '../../export/export.js';
import { handler, type Command } from '../context.js';
import { encryptionOptions, newBundleKey, type EncryptionArgs } from '../encryption.js';
import { renderTable } from '../output.js';
import { etcdAccess, etcdOptions, type EtcdArgs } from '../etcd-options.js';
import type { BundleManifest } from '../../bundle/types.js';

/** Objects per kind: the CRD kinds, or for an etcd-datastore bundle the v3 kinds and IPAM records it counted. */
export function bundleKindCounts(m: BundleManifest): { key: string; count: number }[] {
  if (!m.datastore) return m.resources;
  return Object.entries(m.counts)
    .filter(([k]) => k.endsWith('.projectcalico.org') || k.endsWith('.ipam.etcd'))
    .map(([key, count]) => ({ key, count }))
    .sort((a, b) => a.key.localeCompare(b.key));
}

interface ExportArgs extends EncryptionArgs, EtcdArgs {
  out?: string;
  'exclude-secrets': boolean;
  encrypt: boolean;
}

export const exportCommand: Command<ExportArgs> = {
  command: 'export',
  describe: 'Export every Calico resource (CRDs, custom resources, config, node annotations) to a checksummed bundle',
  builder: (y) =>
    etcdOptions(encryptionOptions(y))
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
      const etcd = etcdAccess(args);
      const run = (out: string | undefined) =>
        exportBundle(client, { out, excludeSecrets: args['exclude-secrets'], ...keyed, signal, ...(etcd ? { etcd } : {}) }, ctx.reporter);
      return isRemote(args.out) ? writeRemote(args.out, defaultBundleName(client.connection.clusterName), run) : run(args.out);
    });
    const kinds = bundleKindCounts(manifest);
    const objects = kinds.reduce((s, r) => s + r.count, 0);
    ctx.print({ path, id: manifest.id, cluster: manifest.cluster, calico: manifest.calico, counts: manifest.counts, notes: manifest.notes }, () =>
      [
        `Bundle ${path}`,
        `${objects} Calico objects of ${kinds.length} kinds${manifest.datastore ? ` (read from etcd at revision ${manifest.datastore.revision})` : ''}, ${Object.keys(manifest.files).length} files`,
        ...manifest.notes.map((n) => `note: ${n}`),
        '',
        renderTable(
          kinds.filter((r) => r.count > 0),
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
