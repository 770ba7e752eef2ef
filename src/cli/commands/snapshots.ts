import type { Argv } from 'yargs';
import { deleteSnapshots, listSnapshots, providersToQuery, type ListedSnapshot } from '../../backup/snapshots.js';
import { parseDuration } from '../../config/config.js';
import { BadInputError, ExitCode, PartialFailureError, RefusedError } from '../../core/errors.js';
import { clusterUid } from '../../kube/cluster-uid.js';
import type { KubeClient } from '../../kube/client.js';
import type { NodeMapping } from '../../config/mapping.js';
import type { ProviderSet } from '../../providers/registry.js';
import { loadProviderSettings, withProviders } from '../../providers/session.js';
import type { SnapshotFilter } from '../../provider-kit/types.js';
import { handler, type CliContext, type Command, type GlobalArgs } from '../context.js';
import { renderTable } from '../output.js';
import { providerOptions, type ProviderArgs } from './backup.js';

interface SnapshotsArgs extends ProviderArgs {
  bundle?: string;
  'older-than'?: string;
  'all-clusters': boolean;
  'dry-run'?: boolean;
}

function common(y: Argv<GlobalArgs>) {
  return providerOptions(y)
    .option('bundle', { type: 'string', describe: 'only snapshots of this bundle id' })
    .option('older-than', { type: 'string', describe: 'only snapshots older than this (e.g. 7d, 12h)' })
    .option('all-clusters', { type: 'boolean', default: false, describe: "include snapshots made for other clusters (default: only the current cluster's)" });
}

/** Find the snapshots the flags select and run `fn` on them; the providers are closed afterwards, also on an error. */
async function withSnapshots<T>(
  ctx: CliContext,
  args: SnapshotsArgs,
  fn: (providers: ProviderSet, found: ListedSnapshot[], failures: string[]) => Promise<T>,
): Promise<T> {
  const { config, mapping } = await loadProviderSettings(args);
  return withProviders({ config, modules: args.providerModule }, ctx.reporter, async (providers) => {
    const { found, failures } = await find(ctx, args, providers, mapping);
    return fn(providers, found, failures);
  });
}

async function find(ctx: CliContext, args: SnapshotsArgs, providers: ProviderSet, mapping: NodeMapping) {
  const explicit = args.provider && args.provider !== 'auto';
  // The cluster tells which providers/regions to ask and which cluster id to filter on; with explicit
  // providers and --all-clusters, snapshots can be found with no cluster at all.
  const client: KubeClient | undefined = explicit && args['all-clusters'] ? undefined : await ctx.client();
  const filter: SnapshotFilter = { bundleId: args.bundle };
  if (client && !args['all-clusters']) filter.clusterId = await clusterUid(client);
  if (args['older-than']) filter.createdBefore = new Date(Date.now() - parseDuration(args['older-than'], '--older-than'));
  const names = await providersToQuery(client, providers, { provider: args.provider, mapping });
  if (!names.length) throw new BadInputError('no provider to ask: no node of this cluster has one', { hint: 'name one with --provider aws|gcp|...' });
  const { snapshots: found, failures } = await listSnapshots(providers, names, filter, ctx.reporter, { tolerant: !explicit });
  return { found, failures };
}

function table(rows: ListedSnapshot[]): string {
  if (!rows.length) return 'no snapshots found';
  return renderTable(rows, [
    { header: 'provider', value: (r) => r.provider },
    { header: 'snapshot', value: (r) => r.snapshotId },
    { header: 'node', value: (r) => r.node },
    { header: 'device', value: (r) => r.device },
    { header: 'GiB', value: (r) => r.sizeGiB },
    { header: 'state', value: (r) => r.state },
    { header: 'created', value: (r) => r.created },
    { header: 'bundle', value: (r) => r.bundleId },
  ]);
}

const listCommand: Command<SnapshotsArgs> = {
  command: 'list',
  describe: 'List the disk snapshots cni-rewind made (found by their tags, no bundle needed)',
  builder: (y: Argv<GlobalArgs>) => common(y) as any,
  handler: handler<SnapshotsArgs>(async (ctx, args) => {
    const failures = await withSnapshots(ctx, args, async (_providers, found, failures) => {
      ctx.print(found, () => table(found));
      return failures;
    });
    // Some providers could not be asked: the list may be missing snapshots.
    return failures.length ? ExitCode.Partial : ExitCode.Ok;
  }),
};

const deleteCommand: Command<SnapshotsArgs> = {
  command: 'delete',
  describe: 'Delete the disk snapshots of a bundle (--bundle ID) or older than a duration (--older-than 7d)',
  builder: (y: Argv<GlobalArgs>) => common(y).option('dry-run', { type: 'boolean', default: false, describe: 'only list what would be deleted' }) as any,
  handler: handler<SnapshotsArgs>(async (ctx, args) => {
    if (!args.bundle && !args['older-than']) throw new BadInputError('say which snapshots to delete: --bundle ID or --older-than DURATION');
    return withSnapshots(ctx, args, async (providers, found, listFailures) => {
      if (listFailures.length)
        throw new PartialFailureError(`not deleting: ${listFailures.length} provider(s) could not be asked (${listFailures.join('; ')})`, {
          hint: 'fix their access, or name the providers to use with --provider',
        });
      if (args['dry-run'] || !found.length) {
        ctx.print({ dryRun: !!args['dry-run'], wouldDelete: found, deleted: 0 }, () =>
          found.length ? `would delete:\n${table(found)}` : 'no snapshots found: nothing to delete',
        );
        return ExitCode.Ok;
      }
      if (!args.yes && !(await ctx.reporter.confirm(`Delete ${found.length} snapshot(s)?`))) {
        throw new RefusedError(`not deleting ${found.length} snapshot(s) without confirmation`, {
          hint: 'pass --yes (or answer y on a terminal); --dry-run lists them',
        });
      }
      const res = await deleteSnapshots(providers, found, ctx.reporter);
      ctx.print({ dryRun: false, deleted: res.deleted, snapshots: found.map((f) => f.snapshotId), failures: res.failures }, () =>
        [`deleted ${res.deleted} snapshot(s)`, ...res.failures.map((f) => `failed: ${f}`)].join('\n'),
      );
      if (res.failures.length) throw new PartialFailureError(`${res.failures.length} provider(s) failed to delete snapshots`);
      return ExitCode.Ok;
    });
  }),
};

export const snapshotsCommand: Command = {
  command: 'snapshots',
  describe: 'List or delete the provider snapshots cni-rewind made',
  builder: (y: Argv<GlobalArgs>) =>
    y
      .command(listCommand as any)
      .command(deleteCommand as any)
      .demandCommand(1, 'name an action: list or delete') as any,
  handler: () => {},
};
