import { SignalScope } from '../signals.js';
import { BadInputError, ExitCode } from '../../core/errors.js';
import { DEFAULT_RESTORE_CONCURRENCY, restoreResources, type RestoreAction, type RestorePlan, type RestoreResult } from '../../restore/restore.js';
import type { RestoreTimings } from '../../restore/timings.js';
import { handler, type CliContext, type Command } from '../context.js';
import { encryptionOptions, openKeyedBundle, type EncryptionArgs } from '../encryption.js';
import { restoreDisksOptions, runRestoreDisks, type RestoreDisksArgs } from './restore-disks.js';
import { renderNotes } from '../notes.js';
import { renderTable, type Styler } from '../output.js';
import { withKindsOption } from '../kinds-option.js';
import { etcdAccess, etcdOptions, type EtcdArgs } from '../etcd-options.js';

interface RestoreArgs extends RestoreDisksArgs, EncryptionArgs, EtcdArgs {
  bundle: string;
  resources: boolean;
  disks: boolean;
  'dry-run': boolean;
  existing: 'skip' | 'update' | 'replace';
  prune: boolean;
  'drop-unknown-fields': boolean;
  'allow-other-cluster': boolean;
  kinds?: string[];
  'write-concurrency': number;
}

/**
 * `restore BUNDLE --resources`. Exit codes: 0 everything restored (dry run: everything would be), 1 dry run
 * found objects a real run would not restore, 2 bad input, 3 partial (some objects failed, were not written,
 * or drifted), 4 cluster unreachable, 5 refused (other cluster without --allow-other-cluster; not confirmed:
 * without --yes the preview is shown and a terminal answer is required, so with no TTY and no --yes nothing
 * is written).
 */
export const restoreCommand: Command<RestoreArgs> = {
  command: 'restore <bundle>',
  describe: 'Restore Calico resources from a bundle: ordered, previewed, schema-aware, with the operator paused',
  builder: (y) =>
    withKindsOption(etcdOptions(encryptionOptions(restoreDisksOptions(y))), 'only these kinds (e.g. IPPool GlobalNetworkPolicy)')
      .positional('bundle', { type: 'string', demandOption: true, describe: 'bundle directory or .tar.gz' })
      .option('resources', { type: 'boolean', default: false, describe: 'restore the Calico resources (CRDs, IP pools, IPAM, policies, ...)' })
      .option('disks', {
        type: 'boolean',
        default: false,
        describe: "restore node disks from the bundle's snapshots, node by node (cordon, drain, restore, start, uncordon)",
      })
      .option('dry-run', {
        type: 'boolean',
        default: false,
        describe: 'show per object what would happen (create / update with diff / unchanged / skip / prune); write nothing',
      })
      .option('existing', {
        choices: ['skip', 'update', 'replace'] as const,
        default: 'update' as const,
        describe:
          'objects that exist and differ: leave them, update them in place, or delete and re-create them (IPAM blocks, handles and affinities that exist are always left: they are live state; an object with finalizers or an operator custom resource is updated in place, never deleted)',
      })
      .option('prune', {
        type: 'boolean',
        default: false,
        describe:
          "also delete objects of the bundle's Calico kinds that the bundle does not have (never IPAM blocks, handles or affinities: they hold allocations made since the backup)",
      })
      .option('drop-unknown-fields', {
        type: 'boolean',
        default: false,
        describe: 'write objects without the fields the installed CRDs do not know (otherwise such objects are not written)',
      })
      .option('allow-other-cluster', { type: 'boolean', default: false, describe: 'restore a bundle exported from a different cluster' })
      .option('write-concurrency', {
        type: 'number',
        default: DEFAULT_RESTORE_CONCURRENCY,
        describe: '--resources: API requests in flight at once while planning, writing and re-reading (HTTP 429 answers are retried with backoff)',
      })
      .epilogue(
        'Exit codes: 0 restored (dry run: all restorable) · 1 dry run: some objects would not be restored · 2 bad input · 3 partial · 4 environment · 5 refused (other cluster, not confirmed; no TTY needs --yes)',
      ) as any,
  handler: handler<RestoreArgs>(async (ctx, args) => {
    if (args.disks && args.resources)
      throw new BadInputError('restore --resources and --disks one at a time', {
        hint: 'disks first (it restarts the nodes), then --resources if the Calico objects still differ',
      });
    if (args.disks) return runRestoreDisks(ctx, args);
    if (!args.resources) throw new BadInputError('say what to restore: --resources or --disks', { hint: 'cni-rewind restore BUNDLE --resources [--dry-run]' });
    const concurrency = args['write-concurrency'];
    if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 256)
      throw new BadInputError(`--write-concurrency must be a whole number from 1 to 256 (got ${concurrency})`);
    const client = await ctx.client();
    const bundle = await openKeyedBundle(ctx, args.bundle, args);
    const etcd = etcdAccess(args);
    // Per-object owner messages are notes of the human result too: printed once, there, summarized (-v lists each).
    // With -o json|yaml the result is data, and stderr keeps them for the person watching.
    if (args.output === 'table') ctx.host.hold(OWNER_NOTE_CODES);
    try {
      const result = await SignalScope.run((signals) =>
        restoreResources(
          client,
          bundle,
          {
            dryRun: args['dry-run'],
            existing: args.existing,
            prune: args.prune,
            dropUnknownFields: args['drop-unknown-fields'],
            allowOtherCluster: args['allow-other-cluster'],
            kinds: args.kinds,
            concurrency,
            confirm: args.yes ? undefined : (plan) => confirmPlan(ctx, plan),
            signal: signals.signal,
            ...(etcd ? { etcd } : {}),
          },
          ctx.reporter,
        ),
      );
      ctx.print(result, () => renderResult(result, ctx.style, args.verbose) + (args.verbose ? `\n${renderTimings(result.timings)}` : ''));
      ctx.host.dropHeld();
      if (result.dryRun) return result.ok ? ExitCode.Ok : ExitCode.Differences;
      return result.ok ? ExitCode.Ok : ExitCode.Partial;
    } finally {
      await bundle.close();
    }
  }),
};

/** The messages whose text every object's notes in the result repeat (src/restore/owners.ts, write.ts, plan.ts). */
const OWNER_NOTE_CODES = ['CNR_RESTORE_OWNER_RELEASED', 'CNR_RESTORE_OWNER_LINKED', 'CNR_RESTORE_OWNER_DROPPED'];

export async function confirmPlan(ctx: CliContext, plan: RestorePlan): Promise<boolean> {
  // The preview goes to stderr so stdout keeps only the result (for -o json).
  ctx.host.text(renderPlan(plan, ctx.style, ctx.args.verbose));
  return ctx.reporter.confirm(`Restore these objects into the cluster?`);
}

/** Unchanged objects are listed with -v only, unless restore still writes to them (references to gone owners). */
const SHOWN_WITHOUT_VERBOSE = (a: RestoreAction) => a.action !== 'unchanged' || !!a.goneOwners?.length;

function actionLabel(a: RestoreAction, s: Styler): string {
  switch (a.action) {
    case 'create':
    case 'unchanged':
      return a.action === 'create' ? s.green('create') : s.dim('unchanged');
    case 'update':
    case 'replace':
      return s.yellow(a.action);
    case 'prune':
    case 'blocked':
    case 'refused':
    case 'unsupported':
      return s.red(a.action);
    default:
      return a.action;
  }
}

function renderPlan(plan: RestorePlan, s: Styler, verbose: boolean): string {
  const lines: string[] = [];
  lines.push(
    `Bundle ${plan.bundle.id} (cluster ${plan.bundle.cluster?.name}, Calico ${plan.bundle.calicoVersion ?? '?'})${plan.cluster.sameCluster ? '' : s.yellow('  from another cluster')}`,
  );
  if (plan.crdsToCreate.length) lines.push(`CRDs to create from the bundle: ${plan.crdsToCreate.join(', ')}`);
  const shown = plan.actions.filter((a) => verbose || SHOWN_WITHOUT_VERBOSE(a));
  if (shown.length) {
    lines.push(
      renderTable(shown, [
        { header: 'action', value: (a) => actionLabel(a, s) },
        { header: 'object', value: (a) => a.id },
        { header: 'phase', value: (a) => a.phase },
        {
          header: 'detail',
          value: (a) => [a.reason, a.serverDryRunError && `API server: ${a.serverDryRunError}`, ...(a.notes ?? [])].filter(Boolean).join('; '),
        },
      ]),
    );
  }
  for (const a of plan.actions) {
    if (a.diff && (a.action === 'update' || a.action === 'replace' || verbose)) lines.push('', a.diff);
    if (a.fix) lines.push(`  fix for ${a.id}: ${a.fix}`);
  }
  const counts = Object.entries(plan.counts)
    .map(([k, v]) => `${v} ${k}`)
    .join(', ');
  lines.push('', `${plan.dryRun ? 'Would do' : 'Plan'}: ${counts || 'nothing'} (existing objects: ${plan.existing})`);
  return lines.join('\n');
}

function renderResult(r: RestoreResult, s: Styler, verbose: boolean): string {
  if (r.dryRun)
    return (
      renderPlan(r, s, verbose) +
      (r.failures.length ? `\n${s.red(`${r.failures.length} object(s) would not be restored`)}` : '') +
      (r.ipamProblems ?? []).map((p) => `\n${s.red(p)}`).join('') +
      '\nDry run: nothing was written.'
    );
  const lines: string[] = [];
  const wrote = r.actions.filter((a) => a.outcome === 'done');
  lines.push(
    `Restored from ${r.bundle.id}: ${wrote.length} object(s) written, ${r.counts.unchanged ?? 0} unchanged, ${r.counts.skip ?? 0} skipped${r.crdsToCreate.length ? `, ${r.crdsToCreate.length} CRD(s) created` : ''}`,
  );
  if (r.guards.paused.length) lines.push(`Put back after the restore: ${r.guards.paused.join('; ')}`);
  for (const p of r.guards.releaseProblems) lines.push(s.red(p));
  if (r.operator?.checked.length) lines.push(`The tigera operator reports: ${r.operator.checked.join('; ')}`);
  if (r.operator?.problem) lines.push(s.red(r.operator.problem));
  lines.push(
    ...renderNotes(
      r.actions.flatMap((a) => (a.notes ?? []).map((note) => ({ id: a.id, note }))),
      verbose,
    ),
  );
  if (r.failures.length) {
    lines.push('', s.red(`${r.failures.length} object(s) not restored:`));
    lines.push(
      renderTable(r.failures, [
        { header: 'object', value: (f) => f.id },
        { header: 'action', value: (f) => f.action },
        { header: 'reason', value: (f) => f.reason },
      ]),
    );
    for (const a of r.actions) if (a.fix && r.failures.some((f) => f.id === a.id)) lines.push(`  fix for ${a.id}: ${a.fix}`);
  }
  if (r.ipamProblems?.length) {
    lines.push('', s.red(`${r.ipamProblems.length} address(es) in use that IPAM does not hold for their user (duplicate IPs to come):`));
    for (const p of r.ipamProblems) lines.push(`  ${p}`);
  }
  if (r.drifted.length) {
    lines.push('', s.yellow(`${r.drifted.length} object(s) changed after they were written:`));
    for (const d of r.drifted) lines.push(`  ${d.id}: ${d.paths.join(', ')}`);
  }
  if (r.ok) lines.push(s.green('Everything in the bundle is restored.'));
  return lines.join('\n');
}

const PHASE_LABELS: [keyof RestoreTimings, string][] = [
  ['readBundle', 'read bundle'],
  ['readCluster', 'read cluster'],
  ['schemaCheck', 'schema check'],
  ['plan', 'plan'],
  ['serverDryRun', 'server dry run'],
  ['confirm', 'confirmation'],
  ['createCrds', 'create CRDs'],
  ['guards', 'operator pause / datastore lock'],
  ['write', 'write'],
  ['prune', 'prune'],
  ['operator', 'operator teardown / resumed operator'],
  ['driftCheck', 'drift check'],
];

/** `-v`: where the time went, phase by phase. */
export function renderTimings(t: RestoreTimings): string {
  const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
  const parts = PHASE_LABELS.filter(([k]) => t[k] !== undefined).map(([k, label]) => `${label} ${s(t[k]!)}`);
  return `Time: ${s(t.total ?? 0)} in all (${parts.join(', ')})`;
}
