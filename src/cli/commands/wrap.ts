import { SignalScope } from '../signals.js';
import type { Argv } from 'yargs';
import { backup } from '../../backup/backup.js';
import { parseDuration } from '../../config/config.js';
import { ExitCode } from '../../core/errors.js';
import { wrap, type WrapResult } from '../../apply/wrap.js';
import { handler, type Command } from '../context.js';
import { loadProviderSettings } from '../../providers/session.js';
import { providerOptions, type ProviderArgs } from './backup.js';

interface WrapArgs extends ProviderArgs {
  command?: string[];
  '--'?: string[];
  'restore-on-failure': boolean;
  'disk-snapshots': boolean;
  out?: string;
  'exclude-secrets': boolean;
  helm?: string;
}

export const wrapCommand: Command<WrapArgs> = {
  command: 'wrap [command..]',
  describe:
    "Back up, run a risky command (after --), then check Calico and its data; print the restore command or restore with --restore-on-failure. Exits with the command's code",
  builder: (y: Argv<any>) =>
    providerOptions(
      y
        .positional('command', { type: 'string', array: true, describe: 'the command to run, after --' })
        .option('restore-on-failure', {
          type: 'boolean',
          default: false,
          describe: 'restore the Calico resources from the backup when the command fails or leaves Calico broken',
        })
        .option('disk-snapshots', {
          type: 'boolean',
          default: false,
          describe: 'back up with disk snapshots of every node (like `backup`), not only the Calico resources',
        })
        .option('out', { type: 'string', describe: 'bundle path (default ./cni-rewind-backups/<cluster>-<UTC time>/)' })
        .option('exclude-secrets', { type: 'boolean', default: false, describe: 'do not put Secrets into the bundle' })
        .option('helm', {
          type: 'string',
          describe: 'the helm program a Helm-installed operator is rolled back with before a restore (default: helm on PATH)',
        }),
    )
      .parserConfiguration({ 'populate--': true })
      .example('$0 wrap --restore-on-failure -- kubectl apply -f calico-3.28.yaml', '') as any,
  handler: handler<WrapArgs>(async (ctx, args) => {
    const argv = [...(args.command ?? []), ...(args['--'] ?? [])].map(String);
    const client = await ctx.client();
    const result = await SignalScope.run((signals) =>
      wrap(
        client,
        {
          command: argv,
          restoreOnFailure: args['restore-on-failure'],
          commandStdoutToStderr: args.output !== 'table',
          out: args.out,
          excludeSecrets: args['exclude-secrets'],
          takeBackup: args['disk-snapshots']
            ? async () => {
                const { config, mapping } = await loadProviderSettings(args);
                const r = await backup(
                  client,
                  {
                    provider: args.provider,
                    providerModules: args.providerModule,
                    out: args.out,
                    snapshotTimeoutMs: parseDuration(config.backup.snapshotTimeout ?? '30m', 'snapshotTimeout'),
                    concurrency: config.backup.concurrency ?? 16,
                    excludeSecrets: args['exclude-secrets'],
                    config,
                    mapping,
                    signal: signals.signal,
                  },
                  ctx.reporter,
                );
                return { path: r.path, diskSnapshots: r.snapshots.length };
              }
            : undefined,
          signal: signals.signal,
          helm: { helm: args.helm, kubeconfig: args.kubeconfig, context: args.context, as: args.as, asGroups: args['as-group'] },
          onCommandRunning: (running) => {
            signals.ignoreInterrupt = running;
          },
        },
        ctx.reporter,
      ),
    );
    ctx.print(result, () => render(result));
    // The command's exit code passes through; a command that "succeeded" but left Calico broken exits 1
    // (3 when the restore we ran did not fully succeed, 5 when a safety check refused it).
    if (result.command.exitCode !== 0) return result.command.exitCode;
    if (result.check.healthy) return ExitCode.Ok;
    if (result.restored?.refused) return ExitCode.Refused;
    return result.restored && !result.restored.ok ? ExitCode.Partial : ExitCode.Differences;
  }),
};

function render(r: WrapResult): string {
  const lines = [
    `bundle   ${r.bundle.path} (${r.bundle.diskSnapshots ? `${r.bundle.diskSnapshots} disk snapshots` : 'resources only'})`,
    `command  ${r.command.argv.join(' ')} -> ${r.command.signal ?? `exit ${r.command.exitCode}`}`,
  ];
  if (r.check.healthy && r.command.exitCode === 0) {
    lines.push(
      `Calico   healthy; no Calico data lost${r.check.changed.length ? ` (${r.check.changed.length} objects changed, see cni-rewind diff ${r.bundle.path})` : ''}`,
    );
    return lines.join('\n');
  }
  if (r.check.problem) lines.push(`check    ${r.check.problem}`);
  if (r.check.lost.length) {
    lines.push(`lost     ${r.check.lost.length} Calico objects are no longer in the cluster:`);
    for (const x of r.check.lost.slice(0, 20)) lines.push(`  - ${x.kind} ${x.namespace ? `${x.namespace}/` : ''}${x.name}`);
    if (r.check.lost.length > 20) lines.push(`  ... and ${r.check.lost.length - 20} more`);
  }
  for (const e of r.check.errors) lines.push(`doctor   ${e.title} (${e.objects.slice(0, 5).join(', ')}): ${e.fix}`);
  for (const c of r.check.changed.slice(0, 5)) lines.push(c.diff);
  if (r.restored) {
    lines.push(
      r.restored.ok
        ? 'restored the Calico resources from the bundle (--restore-on-failure)'
        : `the restore ${r.restored.refused ? 'was refused' : 'did not fully succeed'}: ${
            r.restored.error ??
            r.restored.failures
              .slice(0, 5)
              .map((f) => `${f.id}: ${f.reason}`)
              .join('; ')
          }`,
    );
  }
  if (r.helm) {
    const before = r.helm.revisionBefore === undefined ? 'no revision was deployed before' : `revision ${r.helm.revisionBefore} was deployed before`;
    lines.push(
      `helm     the command made revision ${r.helm.newestAfter} of release ${r.helm.namespace}/${r.helm.release} (${before})${r.helm.rolledBack ? '; rolled back to it first' : ''}`,
    );
  }
  const rollback = r.recovery.filter((c) => c === r.helm?.rollback).length;
  if (r.recovery.length > 1) {
    const reason = [
      ...(rollback ? ['the Helm release goes back before its objects are restored'] : []),
      ...(r.recovery.length - rollback > 1 ? ['the command removed the tigera operator, which alone can release the deleted objects'] : []),
    ];
    lines.push(`${reason.join('; ')}; recover with:`);
    r.recovery.forEach((c, i) => lines.push(`  ${i + 1}. ${c}`));
  } else if (r.recovery.length) lines.push(`${r.restored ? 'retry' : 'restore'} with: ${r.recovery[0]}`);
  return lines.join('\n');
}
