/**
 * backup = export of every Calico resource + snapshots of the selected nodes' disks, into one bundle.
 *
 * A backup is complete only when every snapshot is usable (the provider's waitUsable) within the snapshot
 * timeout. A snapshot that fails or times out fails the backup: the bundle is still committed, marked
 * `complete: false`, with every snapshot made recorded (so `verify`/`inspect` show it and nothing is
 * orphaned), and with `cleanupOnFailure` those snapshots are deleted (recorded as `deleted`).
 * Nodes no provider can resolve make the backup refuse to start unless `allowUnprotectedNodes`.
 */
import { detectCalico } from '../calico/detect.js';
import { refuseUnsupportedCalico } from '../calico/supported.js';
import { openCalicoEtcd, type EtcdAccessFlags } from '../calico/etcd-connection.js';
import path from 'node:path';
import { BundleWriter, isArchivePath } from '../bundle/writer.js';
import type { BundleManifest } from '../bundle/types.js';
import type { CniRewindConfig } from '../config/config.js';
import type { NodeMapping } from '../config/mapping.js';
import { BadInputError, errorMessage, RefusedError } from '../core/errors.js';
import { whenAborted } from '../io/abort.js';
import type { Reporter } from '../io/host.js';
import { DEFAULT_BACKUP_DIR, defaultBundleName, exportCalico } from '../export/export.js';
import { K } from '../kube/builtin.js';
import type { KubeClient } from '../kube/client.js';
import { pool } from '../util/pool.js';
import type { ProviderSet } from '../providers/registry.js';
import { openProviders } from '../providers/session.js';
import { nodeInfo, resolveNodes, type UnresolvedNode } from '../providers/resolve.js';
import { loadPvIndex, selectDisks, type PvIndex } from '../providers/disk-policy.js';
import type { NodeInfo, NodeTarget, SkippedDisk, SnapshotRecord } from '../provider-kit/types.js';

export interface BackupOptions {
  /** Calico's etcd (etcd datastore), when flags name it instead of calico-config and calico-etcd-secrets. */
  etcd?: EtcdAccessFlags;
  /** `auto` (default: per node from providerID / mapping) or one provider name for every node. */
  provider?: string;
  /** Third-party provider modules (paths or package names). */
  providerModules?: string[];
  nodes?: string[];
  selector?: string;
  out?: string;
  snapshotTimeoutMs: number;
  concurrency: number;
  cleanupOnFailure?: boolean;
  allowUnprotectedNodes?: boolean;
  excludeSecrets?: boolean;
  /** AES-256-GCM key for the Secret material in the bundle (`--encrypt`). */
  encryptionKey?: Buffer;
  encryption?: BundleManifest['encryption'];
  /** Ask providers for application-consistent snapshots where they can (GCP guestFlush). */
  consistent?: boolean;
  /** Also snapshot the disks of PersistentVolumes attached to the nodes (`--include-volumes`). */
  includeVolumes?: boolean;
  config: CniRewindConfig;
  mapping: NodeMapping;
  /** Aborted while snapshotting = stop: the snapshots in flight are finished and recorded, no new node is started. */
  signal?: AbortSignal;
}

export interface NodeBackupResult {
  node: string;
  provider: string;
  machine: string;
  ok: boolean;
  snapshots: number;
  error?: string;
  seconds: number;
}

export interface BackupResult {
  path: string;
  bundleId: string;
  complete: boolean;
  nodes: NodeBackupResult[];
  unprotected: UnresolvedNode[];
  snapshots: SnapshotRecord[];
  /** PersistentVolume disks not snapshotted (no --include-volumes). */
  skippedDisks: SkippedDisk[];
  cleanedUp: boolean;
  manifest: BundleManifest;
}

/** The nodes a backup covers: all, `--nodes a,b` (every name must exist) or `--selector`. */
export async function selectNodes(client: KubeClient, opts: { nodes?: string[]; selector?: string }): Promise<NodeInfo[]> {
  if (opts.nodes?.length && opts.selector) throw new BadInputError('give either --nodes or --selector, not both');
  const all = await client.listAll(K.node, opts.selector ? { labelSelector: opts.selector } : {});
  if (opts.nodes?.length) {
    const byName = new Map(all.map((n) => [n.metadata.name, n]));
    const missing = opts.nodes.filter((n) => !byName.has(n));
    if (missing.length) throw new BadInputError(`node(s) not found in the cluster: ${missing.join(', ')}`);
    return opts.nodes.map((n) => nodeInfo(byName.get(n)!));
  }
  if (opts.selector && !all.length) throw new BadInputError(`no node matches --selector ${opts.selector}`);
  return all.map(nodeInfo).sort((a, b) => a.name.localeCompare(b.name));
}

export async function backup(client: KubeClient, opts: BackupOptions, reporter: Reporter): Promise<BackupResult> {
  if (!(opts.concurrency >= 1)) throw new BadInputError('--concurrency must be at least 1');
  // v3-CRD mode would give a bundle without pools, IPAM or policies: refused before any provider is opened or disk
  // touched (an etcd datastore is read from etcd). The export below takes what was detected here, not read again.
  const install = await detectCalico(client);
  refuseUnsupportedCalico(install, 'backup', 'nothing was backed up', { etcdHandled: true });
  // Before any disk is touched: an etcd this machine cannot reach would fail the export after the snapshots.
  const etcdOpened = install.method.datastore.type === 'etcd' ? await openCalicoEtcd(client, opts.etcd) : undefined;
  const providers = await openProviders(
    {
      config: opts.config,
      modules: opts.providerModules,
      onModule: (m, name) => reporter.info('CNR_PROVIDER_MODULE', `loaded provider module ${m} (provider ${name})`),
    },
    reporter,
  );
  try {
    const nodes = await selectNodes(client, opts);
    const provider = opts.provider;
    if (provider && provider !== 'auto') providers.assertKnown(provider);
    const { targets, unresolved } = await resolveNodes(nodes, providers, { mapping: opts.mapping, provider, concurrency: opts.concurrency });
    for (const u of unresolved) reporter.warn('CNR_BACKUP_UNPROTECTED', `node ${u.node} has no provider: ${u.reason}`, u);
    if (unresolved.length && !opts.allowUnprotectedNodes) {
      throw new RefusedError(`${unresolved.length} node(s) cannot be snapshotted: ${unresolved.map((u) => `${u.node} (${u.reason})`).join('; ')}`, {
        hint: 'map them in a node mapping file (--mapping, see examples/node-mapping.yaml), or pass --allow-unprotected-nodes to back up without their disks',
      });
    }

    const out = opts.out ?? path.join(DEFAULT_BACKUP_DIR, defaultBundleName(client.connection.clusterName));
    const writer = await BundleWriter.open(out, { secretsExcluded: opts.excludeSecrets, encryptionKey: opts.encryptionKey, encryption: opts.encryption });
    if (!opts.out) writer.manifest.id = path.basename(out);
    else if (isArchivePath(out)) writer.manifest.id = path.basename(out).replace(/\.(tar\.gz|tgz)$/i, '');
    const m = writer.manifest;
    try {
      await exportCalico(client, writer, { excludeSecrets: opts.excludeSecrets, install, ...(etcdOpened ? { etcdOpened } : {}) }, reporter);
    } catch (err) {
      await writer.abort();
      throw err;
    }
    // Nothing irreversible has happened yet; from here on snapshots exist and must be recorded, whatever happens.
    const bundleId = m.id;
    const clusterId = m.cluster.uid;
    reporter.info(
      'CNR_BACKUP_SNAPSHOTS',
      `snapshotting ${targets.length} node(s) (concurrency ${opts.concurrency}, timeout ${Math.round(opts.snapshotTimeoutMs / 1000)} s)`,
      { bundleId, clusterId },
    );

    const records: SnapshotRecord[] = [];
    const skippedDisks: SkippedDisk[] = [];
    const results: NodeBackupResult[] = [];
    const policy = { includeVolumes: !!opts.includeVolumes, index: undefined as Promise<PvIndex> | undefined, client };
    const deadline = Date.now() + opts.snapshotTimeoutMs;
    const interrupted = { signal: undefined as string | undefined };
    const stopListening = whenAborted(opts.signal, (why) => {
      // Finish recording what exists rather than dying with snapshots nobody knows about.
      interrupted.signal = why;
      reporter.warn('CNR_BACKUP_INTERRUPTED', `${why}: finishing the snapshots in flight and recording them; no new node is started`);
    });
    try {
      // The concurrency bounds the nodes being snapshotted. With a provider whose waits share their polling
      // (sharedWait), a node waiting for its snapshots to become usable gives its slot back: 200 nodes' snapshots
      // are then pending together, not 16 at a time.
      const waits: Promise<void>[] = [];
      await pool(targets, opts.concurrency, async (t) => {
        if (interrupted.signal) {
          results.push({
            node: t.node,
            provider: t.provider,
            machine: t.machine,
            ok: false,
            snapshots: 0,
            error: `not started (${interrupted.signal})`,
            seconds: 0,
          });
          return;
        }
        const provider = await providers.get(t.provider);
        const node = new NodeSnapshots(t, provider, { bundleId, clusterId, deadline, consistent: opts.consistent, policy, skippedDisks }, records, reporter);
        if (!(await node.start())) return void results.push(node.result!);
        const waiting = node.waitUsable().then((r) => void results.push(r));
        if (provider.sharedWait) waits.push(waiting);
        else await waiting;
      });
      await Promise.all(waits);
    } finally {
      stopListening();
    }

    const failed = results.filter((r) => !r.ok);
    let cleanedUp = false;
    if (failed.length && opts.cleanupOnFailure && records.length) {
      reporter.info('CNR_BACKUP_CLEANUP', `--cleanup-on-failure: deleting the ${records.length} snapshot(s) this backup made`);
      for (const [name, recs] of groupByProvider(records)) {
        try {
          await (await providers.get(name)).delete(recs);
          for (const r of recs) r.state = 'deleted';
        } catch (err) {
          reporter.error('CNR_BACKUP_CLEANUP_FAILED', `could not delete ${name} snapshots: ${errorMessage(err)}`);
        }
      }
      cleanedUp = records.every((r) => r.state === 'deleted');
    }
    records.sort((a, b) => a.node.localeCompare(b.node) || a.device.localeCompare(b.device));
    m.snapshots = records;
    skippedDisks.sort((a, b) => a.node.localeCompare(b.node) || a.device.localeCompare(b.device));
    if (skippedDisks.length) m.skippedDisks = skippedDisks;
    // Unprotected nodes were accepted explicitly (--allow-unprotected-nodes) and are listed in the notes.
    m.complete = failed.length === 0;
    for (const f of failed) m.notes.push(`backup incomplete: node ${f.node}: ${f.error}`);
    for (const u of unresolved) m.notes.push(`node ${u.node} has no disk snapshot (${u.reason}; accepted with --allow-unprotected-nodes)`);
    if (cleanedUp) m.notes.push('the snapshots of this failed backup were deleted (--cleanup-on-failure)');
    const final = await writer.commit();
    reporter.info(
      'CNR_BACKUP_DONE',
      `${m.complete ? 'backup complete' : 'backup INCOMPLETE'}: ${final} (${records.length} snapshot(s) of ${targets.length} node(s))`,
      { path: final, complete: m.complete },
    );
    results.sort((a, b) => a.node.localeCompare(b.node));
    return { path: final, bundleId, complete: m.complete, nodes: results, unprotected: unresolved, snapshots: records, skippedDisks, cleanedUp, manifest: m };
  } finally {
    await providers.closeAll();
  }
}

/** One node's snapshots: started (bounded by the backup's concurrency), then waited on until usable. */
class NodeSnapshots {
  private readonly started = Date.now();
  private readonly label: string;
  private mine: SnapshotRecord[] = [];
  /** Set when the node has failed. */
  result?: NodeBackupResult;

  constructor(
    private readonly t: NodeTarget,
    private readonly provider: Awaited<ReturnType<ProviderSet['get']>>,
    private readonly run: {
      bundleId: string;
      clusterId: string;
      deadline: number;
      consistent?: boolean;
      policy: { includeVolumes: boolean; index?: Promise<PvIndex>; client: KubeClient };
      skippedDisks: SkippedDisk[];
    },
    private readonly records: SnapshotRecord[],
    private readonly reporter: Reporter,
  ) {
    this.label = `${t.node} (${t.provider} ${t.machine})`;
  }

  private progress(status: string, current: number, total?: number, done?: boolean): void {
    this.reporter.progress({ id: `snapshot:${this.t.node}`, label: this.label, current, total, status, done });
  }

  /** Start the snapshots; false (and `result` set) when that failed. */
  async start(): Promise<boolean> {
    const t = this.t;
    this.progress('starting snapshots', 0);
    try {
      const run = this.run;
      let disks: string[] | undefined;
      let volumes = new Map<string, string>();
      if (this.provider.attachedDisks) {
        // The PersistentVolumes are read once per backup, by the first node whose provider can choose disks.
        run.policy.index ??= loadPvIndex(run.policy.client);
        const sel = selectDisks(t, await this.provider.attachedDisks(t), await run.policy.index, run.policy.includeVolumes);
        for (const d of sel.skipped) this.reporter.info('CNR_BACKUP_DISK_SKIPPED', `${t.node}: ${d.device} (${d.disk}) not snapshotted: ${d.reason}`, d);
        run.skippedDisks.push(...sel.skipped);
        disks = sel.snapshot;
        volumes = sel.volumes;
      }
      // No disk at all is the provider's error to report (an instance gone, no volumes): snapshot() says so.
      if (disks?.length === 0 && !volumes.size && !run.skippedDisks.some((d) => d.node === t.node)) disks = undefined;
      this.mine =
        disks?.length === 0
          ? []
          : await this.provider.snapshot(t, { bundleId: run.bundleId, clusterId: run.clusterId, node: t.node }, { consistent: run.consistent, disks });
      for (const r of this.mine) if (volumes.has(r.disk)) r.pv = volumes.get(r.disk);
      this.records.push(...this.mine);
      this.reporter.info(
        'CNR_SNAPSHOT_STARTED',
        `${t.node}: ${this.mine.length} snapshot(s) started: ${this.mine.map((r) => `${r.device || r.disk}=${r.snapshotId}`).join(', ')}`,
        { node: t.node, snapshots: this.mine.map((r) => r.snapshotId) },
      );
      this.progress('waiting until usable', 0, this.mine.length);
      return true;
    } catch (err) {
      this.result = this.failed(err);
      return false;
    }
  }

  /** Wait until every snapshot started is usable; never throws (a failure is the node's result). */
  async waitUsable(): Promise<NodeBackupResult> {
    const t = this.t;
    try {
      let usable = 0;
      const waited = await this.provider.waitUsable(this.mine, {
        timeoutMs: Math.max(1000, this.run.deadline - Date.now()),
        onProgress: (r, p) => {
          if (r.state === 'completed') usable++;
          this.progress(p ? `${r.device || r.disk} ${p}` : `${usable}/${this.mine.length} usable`, usable, this.mine.length);
        },
      });
      replaceRecords(this.records, waited);
      this.progress(`${waited.length} snapshot(s) usable`, waited.length, waited.length, true);
      return { node: t.node, provider: t.provider, machine: t.machine, ok: true, snapshots: waited.length, seconds: (Date.now() - this.started) / 1000 };
    } catch (err) {
      return this.failed(err);
    }
  }

  private failed(err: unknown): NodeBackupResult {
    const t = this.t;
    const updated = (err as { records?: SnapshotRecord[] }).records;
    if (updated) replaceRecords(this.records, updated);
    const msg = errorMessage(err);
    this.progress(`failed: ${msg}`, 0, updated ? updated.length : this.mine.length, true);
    this.reporter.error('CNR_SNAPSHOT_FAILED', `${t.node}: ${msg}`, { node: t.node });
    // `updated` also carries snapshots a provider made before snapshot() itself failed (mine is empty then).
    const made = updated ? updated.length : this.mine.length;
    return { node: t.node, provider: t.provider, machine: t.machine, ok: false, snapshots: made, error: msg, seconds: (Date.now() - this.started) / 1000 };
  }
}

function replaceRecords(all: SnapshotRecord[], updated: SnapshotRecord[]): void {
  for (const u of updated) {
    // A snapshot id is unique only per disk for some providers (qemu-img names, libvirt snapshot names).
    const i = all.findIndex((r) => r.provider === u.provider && r.node === u.node && r.disk === u.disk && r.snapshotId === u.snapshotId);
    if (i >= 0) all[i] = u;
    else all.push(u);
  }
}

export function groupByProvider(records: SnapshotRecord[]): Map<string, SnapshotRecord[]> {
  const m = new Map<string, SnapshotRecord[]>();
  for (const r of records) m.set(r.provider, [...(m.get(r.provider) ?? []), r]);
  return m;
}
