/**
 * `restore BUNDLE --disks`: the options and the handler body that the `restore` command calls
 * (restoreDisksOptions in its builder, runRestoreDisks when --disks is given).
 */
import type { Argv } from 'yargs';
import { restoreNodeDisks, type NodeRestorePlan, type RestoreDisksRun } from '../../restore/disks.js';
import { readBundleManifest } from '../../bundle/reader.js';
import { parseDuration } from '../../config/config.js';
import { ExitCode } from '../../core/errors.js';
import type { CliContext, GlobalArgs } from '../context.js';
import { renderTable } from '../output.js';
import { loadProviderSettings, openProviders } from '../../providers/session.js';
import { providerOptions, splitList, type ProviderArgs } from './backup.js';

export interface RestoreDisksArgs extends ProviderArgs {
  bundle: string;
  nodes?: string;
  concurrency: number;
  'drain-timeout': string;
  'ready-timeout': string;
  'delete-replaced-volumes': boolean;
  'include-volumes': boolean;
  'dry-run'?: boolean;
  'allow-other-cluster'?: boolean;
}

export function restoreDisksOptions<T>(y: Argv<T>): Argv<T & RestoreDisksArgs> {
  return providerOptions(y)
    .option('nodes', { type: 'string', describe: '--disks: only these nodes (comma-separated; default: every node in the bundle)' })
    .option('concurrency', { type: 'number', default: 1, describe: '--disks: nodes restored at the same time' })
    .option('drain-timeout', { type: 'string', default: '10m', describe: '--disks: how long a drain may wait for PodDisruptionBudgets' })
    .option('ready-timeout', { type: 'string', default: '15m', describe: '--disks: how long a node may take to be Ready after its disks are restored' })
    .option('delete-replaced-volumes', {
      type: 'boolean',
      default: false,
      describe: '--disks: delete the volumes/disks the restore replaced (default: keep them, tagged with the run id)',
    })
    .option('include-volumes', {
      type: 'boolean',
      default: false,
      describe: '--disks: also restore the PersistentVolume disks a `backup --include-volumes` recorded (default: leave them alone)',
    }) as unknown as Argv<T & RestoreDisksArgs>;
}

function planText(plan: NodeRestorePlan[]): string {
  return plan
    .map((p) =>
      [
        `node ${p.node} (${p.provider} ${p.machine}):`,
        `  1. cordon`,
        `  2. drain: evict ${p.evict.length ? p.evict.join(', ') : 'no pods'} (DaemonSet pods stay)`,
        `  3. restore ${p.disks.map((d) => `${d.device}${d.boot ? ' (boot)' : ''} <- ${d.snapshotId}`).join(', ')}`,
        ...p.untouched.map((u) => `     left alone: ${u.device} (${u.disk}): ${u.reason}`),
        `  4. start, wait for the Node to be Ready`,
        `  5. uncordon`,
      ].join('\n'),
    )
    .join('\n');
}

export async function runRestoreDisks(ctx: CliContext, args: RestoreDisksArgs & GlobalArgs): Promise<number> {
  const { config, mapping } = await loadProviderSettings(args);
  const manifest = await readBundleManifest(args.bundle);
  const providers = await openProviders({ config, modules: args.providerModule }, ctx.reporter);
  let run: RestoreDisksRun;
  try {
    run = await restoreNodeDisks(
      await ctx.client(),
      manifest,
      providers,
      {
        nodes: splitList(args.nodes),
        concurrency: args.concurrency ?? 1,
        drainTimeoutMs: parseDuration(args['drain-timeout'] ?? '10m', '--drain-timeout'),
        readyTimeoutMs: parseDuration(args['ready-timeout'] ?? '15m', '--ready-timeout'),
        dryRun: args['dry-run'],
        deleteReplaced: args['delete-replaced-volumes'],
        includeVolumes: args['include-volumes'],
        allowOtherCluster: args['allow-other-cluster'],
        mapping,
        confirm: args.yes
          ? undefined
          : async (plan) => {
              ctx.host.text(planText(plan));
              return ctx.reporter.confirm(`Restore the disks of ${plan.length} node(s) (their current disk contents are replaced)?`);
            },
      },
      ctx.reporter,
    );
  } finally {
    await providers.closeAll();
  }
  ctx.print(run, () => {
    if (run.dryRun) {
      const lines = ['dry run: nothing changed. Per node:', planText(run.plan)];
      if (!run.preflight.ok) lines.push('', 'a real run would be REFUSED by the drain preflight (see above)');
      return lines.join('\n');
    }
    return renderTable(run.outcomes, [
      { header: 'node', value: (o) => o.node },
      { header: 'state', value: (o) => o.state + (o.failedAt ? ` (at ${o.failedAt})` : '') },
      { header: 'cordoned', value: (o) => (o.cordoned ? 'yes' : 'no') },
      { header: 'restored', value: (o) => o.result?.restored.map((r) => `${r.device}->${r.newDisk ?? r.snapshotId}`).join(' ') ?? '' },
      { header: 'error', value: (o) => o.error ?? '' },
    ]);
  });
  if (run.dryRun) return run.preflight.ok ? ExitCode.Ok : ExitCode.Refused;
  return run.ok ? ExitCode.Ok : ExitCode.Partial;
}
