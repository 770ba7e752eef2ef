import { SignalScope } from '../signals.js';
import { isRemote, writeRemote } from '../../bundle/remote.js';
import type { Argv } from 'yargs';
import { backup } from '../../backup/backup.js';
import { defaultBundleName } from '../../export/export.js';
import { parseDuration } from '../../config/config.js';
import { ExitCode } from '../../core/errors.js';
import { loadProviderSettings } from '../../providers/session.js';
import { handler, type Command, type GlobalArgs } from '../context.js';
import { etcdAccess, etcdOptions, type EtcdArgs } from '../etcd-options.js';
import { encryptionOptions, newBundleKey, type EncryptionArgs } from '../encryption.js';
import { renderTable } from '../output.js';

/** Options every provider-using command shares (backup, snapshots, restore --disks). */
export interface ProviderArgs {
  provider: string;
  providerModule?: string[];
  config?: string;
  mapping?: string;
}

export function providerOptions<T>(y: Argv<T>): Argv<T & ProviderArgs> {
  return y
    .option('provider', {
      type: 'string',
      default: 'auto',
      describe:
        'auto (per node from spec.providerID and the mapping file) or one provider for every node: aws, azure, gcp, libvirt, proxmox, vsphere, or a --provider-module name',
    })
    .option('provider-module', { type: 'string', array: true, describe: 'load a third-party provider module (file path or package name); repeatable' })
    .option('config', { type: 'string', describe: 'cni-rewind config file (provider settings; see examples/cni-rewind.yaml)' })
    .option('mapping', { type: 'string', describe: 'node mapping file: node -> provider/machine (see examples/node-mapping.yaml)' }) as Argv<T & ProviderArgs>;
}

export const splitList = (v: string | string[] | undefined): string[] | undefined =>
  v === undefined
    ? undefined
    : (Array.isArray(v) ? v : [v])
        .flatMap((s) => s.split(','))
        .map((s) => s.trim())
        .filter(Boolean);

interface BackupArgs extends ProviderArgs, EncryptionArgs, EtcdArgs {
  nodes?: string;
  selector?: string;
  out?: string;
  'snapshot-timeout'?: string;
  concurrency?: number;
  'cleanup-on-failure': boolean;
  'allow-unprotected-nodes': boolean;
  'exclude-secrets': boolean;
  encrypt?: boolean;
  'guest-flush': boolean;
  'include-volumes': boolean;
}

export const backupCommand: Command<BackupArgs> = {
  command: 'backup',
  describe: "Export every Calico resource and snapshot the nodes' disks through their providers, into one bundle",
  builder: (y: Argv<GlobalArgs>) =>
    etcdOptions(encryptionOptions(providerOptions(y)))
      .option('nodes', { type: 'string', describe: 'only these nodes (comma-separated)' })
      .option('selector', { alias: 'l', type: 'string', describe: 'only nodes matching this label selector' })
      .option('out', {
        type: 'string',
        describe: 'bundle path: a directory, a .tar.gz, or s3://BUCKET/PREFIX[/NAME.tar.gz] (default ./cni-rewind-backups/<cluster>-<UTC time>/)',
      })
      .option('snapshot-timeout', { type: 'string', describe: 'how long snapshots may take to become usable (default 30m)' })
      .option('concurrency', { type: 'number', describe: 'nodes snapshotted at the same time (default 16)' })
      .option('cleanup-on-failure', { type: 'boolean', default: false, describe: 'delete the snapshots already made when the backup fails' })
      .option('allow-unprotected-nodes', {
        type: 'boolean',
        default: false,
        describe: 'back up even when some nodes have no provider (their disks are not snapshotted; the bundle is marked incomplete)',
      })
      .option('exclude-secrets', { type: 'boolean', default: false, describe: 'do not put Secrets into the bundle' })
      .option('guest-flush', {
        type: 'boolean',
        default: false,
        describe: 'ask providers for application-consistent snapshots where supported (GCP guestFlush)',
      })
      .option('include-volumes', {
        type: 'boolean',
        default: false,
        describe: "also snapshot the disks of PersistentVolumes attached to the nodes (default: only the nodes' own disks; PV disks are listed as skipped)",
      })
      .option('encrypt', {
        type: 'boolean',
        default: false,
        describe: 'encrypt Secret material at rest (AES-256-GCM) with the key from --encryption-key-file, --encryption-passphrase-file or the environment',
      }) as any,
  handler: handler<BackupArgs>(async (ctx, args) => {
    const { config, mapping } = await loadProviderSettings(args);
    const keyed = newBundleKey(ctx, args);
    const timeout = args['snapshot-timeout'] ?? config.backup.snapshotTimeout ?? '30m';
    const client = await ctx.client();
    const etcd = etcdAccess(args);
    const run = (out: string | undefined, signal: AbortSignal) =>
      backup(
        client,
        {
          provider: args.provider,
          providerModules: args.providerModule,
          nodes: splitList(args.nodes),
          selector: args.selector,
          out,
          snapshotTimeoutMs: parseDuration(timeout, '--snapshot-timeout'),
          concurrency: args.concurrency ?? config.backup.concurrency ?? 16,
          cleanupOnFailure: args['cleanup-on-failure'],
          allowUnprotectedNodes: args['allow-unprotected-nodes'],
          excludeSecrets: args['exclude-secrets'],
          ...keyed,
          consistent: args['guest-flush'],
          includeVolumes: args['include-volumes'],
          config,
          mapping,
          signal,
          ...(etcd ? { etcd } : {}),
        },
        ctx.reporter,
      );
    const result = await SignalScope.run(({ signal }) =>
      isRemote(args.out) ? writeRemote(args.out, defaultBundleName(client.connection.clusterName), (out) => run(out, signal)) : run(args.out, signal),
    );
    const { manifest: _m, ...data } = result;
    ctx.print(data, () => {
      const lines = [`bundle    ${result.path}`, `id        ${result.bundleId}`, `complete  ${result.complete ? 'yes' : ctx.style.red('NO')}`];
      if (result.nodes.length) {
        lines.push(
          '',
          renderTable(result.nodes, [
            { header: 'node', value: (n) => n.node },
            { header: 'provider', value: (n) => n.provider },
            { header: 'machine', value: (n) => n.machine },
            { header: 'snapshots', value: (n) => n.snapshots },
            { header: 'seconds', value: (n) => n.seconds.toFixed(1) },
            { header: 'result', value: (n) => (n.ok ? 'ok' : `FAILED: ${n.error}`) },
          ]),
        );
      }
      if (result.unprotected.length) lines.push('', `not protected (no disk snapshot): ${result.unprotected.map((u) => u.node).join(', ')}`);
      if (result.skippedDisks.length) {
        lines.push(
          '',
          `not snapshotted (PersistentVolume disks; --include-volumes adds them): ${result.skippedDisks.map((d) => `${d.node} ${d.device} ${d.disk} (pv ${d.pv})`).join(', ')}`,
        );
      }
      if (result.cleanedUp) lines.push('', 'the snapshots made were deleted (--cleanup-on-failure)');
      return lines.join('\n');
    });
    return result.complete ? ExitCode.Ok : ExitCode.Partial;
  }),
};
