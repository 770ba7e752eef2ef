import { openBundle } from '../../bundle/reader.js';
import type { BundleManifest } from '../../bundle/types.js';
import { handler, type Command } from '../context.js';
import { oneLine, renderTable } from '../output.js';

interface InspectArgs {
  bundle: string;
  files: boolean;
}

/** The manifest as `inspect -o json` prints it: everything but the per-file checksums unless --files. */
export function inspectData(m: BundleManifest, withFiles: boolean): Record<string, unknown> {
  const { files, ...rest } = m;
  return withFiles ? { ...rest, files } : { ...rest, fileCount: Object.keys(files).length };
}

export const inspectCommand: Command<InspectArgs> = {
  command: 'inspect <bundle>',
  describe: 'Summarize a bundle: cluster, versions, counts per kind, snapshot records',
  builder: (y) =>
    y
      .positional('bundle', { type: 'string', demandOption: true, describe: 'bundle directory or .tar.gz' })
      .option('files', { type: 'boolean', default: false, describe: 'include every file with its checksum in -o json|yaml' }) as any,
  handler: handler<InspectArgs>(async (ctx, args) => {
    const b = await openBundle(args.bundle);
    try {
      const m = b.manifest;
      ctx.print(inspectData(m, args.files), () => {
        const lines = [
          `Bundle      ${oneLine(m.id)}  (format ${oneLine(m.formatVersion)}, ${oneLine(m.tool?.name)} ${oneLine(m.tool?.version)})`,
          `Created     ${oneLine(m.createdAt)}`,
          `Cluster     ${oneLine(m.cluster.name)}  uid ${oneLine(m.cluster.uid)}  ${oneLine(m.cluster.kubernetesVersion)}  ${oneLine(m.cluster.server)}`,
          `Calico      ${oneLine(m.calico.version ?? 'unknown version')} (${oneLine(m.calico.installType)} install)${m.calico.operatorImage ? `  operator ${oneLine(m.calico.operatorImage)}` : ''}`,
          ...(m.datastore ? [`Datastore   etcd (read from Calico's etcd at revision ${oneLine(m.datastore.revision)})`] : []),
          `Secrets     ${m.secretsExcluded ? 'excluded' : m.encryption ? `included (${oneLine(m.encryption.algorithm)}${m.encryption.kdf === 'scrypt' ? ', passphrase' : ''})` : 'included'}`,
          `Complete    ${m.complete ? 'yes' : 'no'}`,
          ...m.notes.map((n) => `Note        ${oneLine(n)}`),
          '',
          renderTable(
            Object.entries(m.counts).sort(([a], [b]) => a.localeCompare(b)),
            [
              { header: 'resource', value: ([k]) => k },
              { header: 'count', value: ([, n]) => n },
            ],
          ),
        ];
        if (m.snapshots.length) {
          lines.push(
            '',
            renderTable(m.snapshots, [
              { header: 'node', value: (s) => s.node },
              { header: 'provider', value: (s) => s.provider },
              { header: 'device', value: (s) => s.device },
              { header: 'disk', value: (s) => s.disk },
              { header: 'snapshot', value: (s) => s.snapshotId },
              { header: 'state', value: (s) => s.state },
            ]),
          );
        }
        return lines.join('\n');
      });
    } finally {
      await b.close();
    }
  }),
};
