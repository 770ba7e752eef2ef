/**
 * restore --disks: put nodes' disks back to a bundle's snapshots, one node at a time by default:
 *   cordon -> drain (Eviction API, PDBs respected) -> provider.restoreDisks (stop/swap/start) -> Node Ready -> uncordon.
 * Everything that could make the rollout stop half-way is checked first (bundle complete for those nodes, same
 * cluster, machines still the ones snapshotted, drain preflight). A failure stops the rollout: nodes not started
 * are left alone, and the result says which node is in which state.
 */
import type { BundleManifest } from '../bundle/types.js';
import type { NodeMapping } from '../config/mapping.js';
import { BadInputError, errorMessage, RefusedError } from '../core/errors.js';
import type { Reporter } from '../io/host.js';
import { K } from '../kube/builtin.js';
import { clusterUid } from '../kube/cluster-uid.js';
import type { KubeClient } from '../kube/client.js';
import { pool } from '../util/pool.js';
import type { ProviderSet } from '../providers/registry.js';
import { chooseProvider, nodeInfo } from '../providers/resolve.js';
import { matchRecordedDisks } from '../providers/disk-policy.js';
import type { NodeTarget, RestoreDisksResult, SnapshotRecord } from '../provider-kit/types.js';
import { cordon, describePreflight, drainNode, drainPreflight, uncordon, waitNodeReady, type DrainPreflight } from '../drain/drain.js';

export type NodeRestoreState = 'pending' | 'cordoned' | 'drained' | 'disks-restored' | 'ready' | 'done' | 'failed';

export interface NodeRestorePlan {
  node: string;
  provider: string;
  machine: string;
  evict: string[];
  disks: { device: string; disk: string; snapshotId: string; boot: boolean; sizeGiB?: number; pv?: string }[];
  /** Recorded disks left alone: PersistentVolumes without --include-volumes, disks no longer attached. */
  untouched: { device: string; disk: string; pv?: string; reason: string }[];
}

export interface NodeRestoreOutcome {
  node: string;
  state: NodeRestoreState;
  /** The step that failed, when state is `failed`. */
  failedAt?: 'cordon' | 'drain' | 'restore-disks' | 'wait-ready' | 'uncordon';
  error?: string;
  /** Whether the node is still cordoned (a failed node stays cordoned on purpose). */
  cordoned: boolean;
  result?: RestoreDisksResult;
  seconds?: number;
}

export interface RestoreDisksRun {
  dryRun: boolean;
  runId: string;
  plan: NodeRestorePlan[];
  preflight: DrainPreflight;
  outcomes: NodeRestoreOutcome[];
  ok: boolean;
}

export interface RestoreDisksEngineOptions {
  nodes?: string[];
  concurrency: number;
  drainTimeoutMs: number;
  readyTimeoutMs: number;
  dryRun?: boolean;
  deleteReplaced?: boolean;
  /** Also restore PersistentVolume disks the backup included (`--include-volumes`). */
  includeVolumes?: boolean;
  allowOtherCluster?: boolean;
  mapping: NodeMapping;
  /** Asked once before anything is touched (not in dry runs); false stops with RefusedError. */
  confirm?: (plan: NodeRestorePlan[]) => Promise<boolean>;
}

export async function restoreNodeDisks(
  client: KubeClient,
  manifest: BundleManifest,
  providers: ProviderSet,
  opts: RestoreDisksEngineOptions,
  reporter: Reporter,
): Promise<RestoreDisksRun> {
  const runId = `cnr-restore-${new Date().toISOString().replace(/[-:.]/g, '').slice(0, 15)}`;
  const byNode = new Map<string, SnapshotRecord[]>();
  for (const r of manifest.snapshots ?? []) byNode.set(r.node, [...(byNode.get(r.node) ?? []), r]);
  if (!byNode.size) throw new BadInputError(`bundle ${manifest.id} has no disk snapshots`, { hint: 'it was made by `export`, not `backup`' });
  const nodes = opts.nodes?.length ? opts.nodes : [...byNode.keys()].sort();
  const notInBundle = nodes.filter((n) => !byNode.has(n));
  if (notInBundle.length)
    throw new BadInputError(`bundle ${manifest.id} has no snapshots of node(s) ${notInBundle.join(', ')}`, {
      hint: `it has: ${[...byNode.keys()].join(', ')}`,
    });
  for (const n of nodes) {
    const bad = byNode.get(n)!.filter((r) => r.state !== 'completed');
    if (bad.length)
      throw new RefusedError(`node ${n}: ${bad.length} snapshot(s) in the bundle are not usable (${bad.map((r) => `${r.snapshotId} ${r.state}`).join(', ')})`, {
        hint: 'this backup was incomplete; restore another bundle',
      });
  }

  const uid = await clusterUid(client);
  if (manifest.cluster?.uid && uid !== manifest.cluster.uid && !opts.allowOtherCluster) {
    throw new RefusedError(`bundle ${manifest.id} was made for cluster ${manifest.cluster.name} (${manifest.cluster.uid}), not this one (${uid})`, {
      hint: 'pass --allow-other-cluster if this is really meant',
    });
  }

  // Resolve each node's machine now and check it is the machine that was snapshotted.
  const targets = new Map<string, { target: NodeTarget; records: SnapshotRecord[]; untouched: NodeRestorePlan['untouched'] }>();
  for (const n of nodes) {
    const records = byNode.get(n)!;
    const providerName = records[0]!.provider;
    const live = await client.getOrUndefined(K.node, undefined, n);
    if (!live)
      throw new RefusedError(`node ${n} is not in the cluster any more`, { hint: 'restore its disks through the provider console, or pick other --nodes' });
    if (!providers.has(providerName))
      throw new BadInputError(`node ${n}: its snapshots were made by provider '${providerName}', which is not available`, {
        hint: 'give it with --provider-module',
      });
    const provider = await providers.get(providerName);
    const info = nodeInfo(live);
    const entry = chooseProvider(info, opts.mapping, providerName).entry;
    const target = await provider.resolve(info, entry);
    if (!target) throw new RefusedError(`node ${n}: provider ${providerName} cannot find its machine any more`);
    if (target.machine !== records[0]!.machine) {
      throw new RefusedError(`node ${n} now runs on ${target.machine}, but the snapshots are of ${records[0]!.machine}`, {
        hint: 'the node was replaced; restoring old disks onto a new machine is not done automatically',
      });
    }
    // Each recorded disk is matched to the live one by its id (refused, naming it, if a device now holds another).
    const sel = provider.attachedDisks
      ? matchRecordedDisks(target, records, await provider.attachedDisks(target), !!opts.includeVolumes)
      : { restore: records, untouched: [] };
    for (const u of sel.untouched) reporter.info('CNR_RESTORE_DISK_UNTOUCHED', `${n}: ${u.device} (${u.disk}) not restored: ${u.reason}`, u);
    targets.set(n, { target, records: sel.restore, untouched: sel.untouched });
  }

  const preflight = await drainPreflight(client, nodes);
  const plan: NodeRestorePlan[] = nodes.map((n) => {
    const { target, records, untouched } = targets.get(n)!;
    return {
      node: n,
      provider: target.provider,
      machine: target.machine,
      evict: preflight.evict[n] ?? [],
      disks: records.map((r) => ({
        device: r.device,
        disk: r.disk,
        snapshotId: r.snapshotId,
        boot: !!r.boot,
        sizeGiB: r.sizeGiB,
        ...(r.pv ? { pv: r.pv } : {}),
      })),
      untouched,
    };
  });
  if (!preflight.ok) {
    for (const line of describePreflight(preflight)) reporter.error('CNR_DRAIN_PREFLIGHT', line);
    if (!opts.dryRun) {
      throw new RefusedError(`drain preflight failed: ${describePreflight(preflight).join('; ')}`, {
        hint: 'a PodDisruptionBudget is never bypassed: scale the workload or relax the PDB, then run again (nothing was changed)',
      });
    }
  }
  if (opts.dryRun)
    return { dryRun: true, runId, plan, preflight, outcomes: nodes.map((n) => ({ node: n, state: 'pending', cordoned: false })), ok: preflight.ok };
  if (opts.confirm && !(await opts.confirm(plan)))
    throw new RefusedError('disk restore not confirmed; nothing was changed', { hint: 'pass --yes to restore without asking' });

  const outcomes = new Map<string, NodeRestoreOutcome>(nodes.map((n) => [n, { node: n, state: 'pending', cordoned: false }]));
  let stop = false;
  await pool(nodes, Math.max(1, opts.concurrency), async (n) => {
    if (stop) return;
    const o = outcomes.get(n)!;
    const { target, records } = targets.get(n)!;
    const started = Date.now();
    const step = async <T>(name: NonNullable<NodeRestoreOutcome['failedAt']>, fn: () => Promise<T>): Promise<T> => {
      reporter.progress({ id: `restore:${n}`, label: `restore ${n}`, current: 0, status: name });
      try {
        return await fn();
      } catch (err) {
        o.failedAt = name;
        throw err;
      }
    };
    try {
      await step('cordon', () => cordon(client, n));
      o.cordoned = true;
      o.state = 'cordoned';
      await step('drain', () => drainNode(client, n, { timeoutMs: opts.drainTimeoutMs }, reporter));
      o.state = 'drained';
      const provider = await providers.get(target.provider);
      o.result = await step('restore-disks', () => provider.restoreDisks(target, records, { runId, deleteReplaced: opts.deleteReplaced }));
      o.state = 'disks-restored';
      reporter.info(
        'CNR_RESTORE_DISKS_NODE',
        `${n}: restored ${o.result.restored.map((r) => `${r.device} from ${r.snapshotId}${r.newDisk ? ` (new ${r.newDisk})` : ''}`).join(', ')}`,
        o.result,
      );
      await step('wait-ready', () => waitNodeReady(client, n, opts.readyTimeoutMs));
      o.state = 'ready';
      await step('uncordon', () => uncordon(client, n));
      o.cordoned = false;
      o.state = 'done';
      o.seconds = (Date.now() - started) / 1000;
      reporter.progress({ id: `restore:${n}`, label: `restore ${n}`, current: 1, total: 1, status: 'done', done: true });
    } catch (err) {
      o.error = errorMessage(err);
      o.seconds = (Date.now() - started) / 1000;
      reporter.error('CNR_RESTORE_DISKS_FAILED', `${n}: ${o.failedAt} failed after state ${o.state}: ${o.error}${o.cordoned ? ' (node left cordoned)' : ''}`);
      o.state = 'failed';
      stop = true; // a failure stops the rollout: no further node is started
    }
  });
  const outs = nodes.map((n) => outcomes.get(n)!);
  return { dryRun: false, runId, plan, preflight, outcomes: outs, ok: outs.every((o) => o.state === 'done') };
}
