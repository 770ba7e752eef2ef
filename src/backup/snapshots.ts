/**
 * `snapshots list|delete`: the snapshots cni-rewind made, found through the providers by their tags/labels
 * (bundle id, cluster id, node, tool), so they can be listed and cleaned up without the bundle.
 */
import { errorMessage, EnvironmentError, isCniRewindError } from '../core/errors.js';
import type { Reporter } from '../io/host.js';
import { K } from '../kube/builtin.js';
import type { KubeClient } from '../kube/client.js';
import type { ProviderSet } from '../providers/registry.js';
import { chooseProvider, nodeInfo, resolveNodes } from '../providers/resolve.js';
import type { NodeMapping } from '../config/mapping.js';
import type { SnapshotFilter, SnapshotRecord } from '../provider-kit/types.js';
import { groupByProvider } from './backup.js';

export interface ListedSnapshot extends SnapshotRecord {
  bundleId?: string;
  clusterId?: string;
}

/**
 * Which providers to ask: the named ones, or (`auto`) those the cluster's nodes resolve to. Resolving the
 * nodes also tells providers where to look (AWS regions, GCP projects/zones).
 */
export async function providersToQuery(
  client: KubeClient | undefined,
  providers: ProviderSet,
  opts: { provider?: string; mapping: NodeMapping },
): Promise<string[]> {
  const named = (opts.provider ?? 'auto')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s && s !== 'auto');
  if (client) {
    const nodes = (await client.listAll(K.node)).map(nodeInfo);
    const relevant = named.length ? nodes.filter((n) => named.includes(chooseProvider(n, opts.mapping).provider ?? '')) : nodes;
    await resolveNodes(relevant, providers, { mapping: opts.mapping, provider: 'auto' });
    if (!named.length)
      return [...new Set(relevant.map((n) => chooseProvider(n, opts.mapping).provider).filter((p): p is string => !!p && providers.has(p)))].sort();
  }
  return named;
}

/**
 * Ask each provider for its snapshots. With `tolerant` (providers picked automatically from the nodes), one
 * provider failing (no credentials, unreachable) is reported and the others are still listed.
 */
export async function listSnapshots(
  providers: ProviderSet,
  names: string[],
  filter: SnapshotFilter,
  reporter: Reporter,
  opts: { tolerant?: boolean } = {},
): Promise<{ snapshots: ListedSnapshot[]; failures: string[] }> {
  const out: ListedSnapshot[] = [];
  const failures: string[] = [];
  for (const name of names) {
    let recs: SnapshotRecord[];
    try {
      recs = await (await providers.get(name)).list(filter);
    } catch (err) {
      const e = isCniRewindError(err) ? err : new EnvironmentError(`provider ${name}: listing snapshots failed: ${errorMessage(err)}`, { cause: err });
      if (!opts.tolerant) throw e;
      failures.push(`${name}: ${e.message}`);
      reporter.warn('CNR_SNAPSHOTS_PROVIDER_FAILED', `provider ${name}: ${e.message}`);
      continue;
    }
    reporter.debug('CNR_SNAPSHOTS_LISTED', `${name}: ${recs.length} snapshot(s)`);
    for (const r of recs) {
      const d = (r.details ?? {}) as { bundleId?: string; clusterId?: string };
      out.push({ ...r, bundleId: d.bundleId, clusterId: d.clusterId });
    }
  }
  out.sort((a, b) => a.created.localeCompare(b.created) || a.node.localeCompare(b.node) || a.device.localeCompare(b.device));
  return { snapshots: out, failures };
}

export async function deleteSnapshots(providers: ProviderSet, records: SnapshotRecord[], reporter: Reporter): Promise<{ deleted: number; failures: string[] }> {
  let deleted = 0;
  const failures: string[] = [];
  for (const [name, recs] of groupByProvider(records)) {
    try {
      await (await providers.get(name)).delete(recs);
      deleted += recs.length;
      reporter.info('CNR_SNAPSHOTS_DELETED', `${name}: deleted ${recs.length} snapshot(s)`);
    } catch (err) {
      failures.push(`${name}: ${errorMessage(err)}`);
    }
  }
  return { deleted, failures };
}
