/**
 * GCP Compute Engine snapshot provider (@google-cloud/compute 6.15, REST transport).
 *
 * Snapshot: the attached persistent disks the disk policy selects (one createSnapshot per disk: GCE has no multi-disk
 * crash-consistent call; `guestFlush` asks the guest for application consistency), labelled so the snapshots
 * can be found without the bundle; the zone operations are waited on in a loop until DONE (wait() returns
 * after ~2 min at most, or earlier), then the snapshot is polled until READY.
 * Regional persistent disks (source `projects/P/regions/R/disks/D`) go through the regional API (regionDisks,
 * regionOperations) for get, snapshot, re-create (same replica zones) and delete.
 * Restore: stop, create disks from the snapshots, detach the old ones, attach the new ones on the same device
 * names (the boot disk as boot), start. Replaced disks are kept unless deleteReplaced.
 *
 * Files: client.ts (the API, retries, operations), records.ts (pure: node -> instance, labels, list filter and
 * records), restore.ts (disk restore), util.ts (naming, labels, error mapping).
 *
 * Credentials: Application Default Credentials. Config (providers.gcp): project, zone defaults, guestFlush,
 * pollSeconds, and for tests only `endpoint` (http://127.0.0.1:PORT) + `auth: none`.
 *
 * GCE label keys/values must be lowercase [a-z0-9_-] (<= 63 chars): the shared tag keys are mapped
 * (`cni-rewind/bundle-id` -> `cni-rewind-bundle-id`) and values lowercased; the exact bundle id is also in
 * the snapshot description.
 */
import {
  BadInputError,
  deleteEach,
  EnvironmentError,
  errorMessage,
  type MachineDisk,
  type NodeInfo,
  type NodeMappingEntry,
  type NodeTarget,
  PROVIDER_API_VERSION,
  type ProviderContext,
  type ProviderModule,
  type RestoreDisksOptions,
  type RestoreDisksResult,
  sleep,
  type SnapshotFilter,
  type SnapshotOptions,
  type SnapshotProvider,
  type SnapshotRecord,
  type SnapshotTags,
  throwUnlessUsable,
  type WaitOptions,
} from '../../src/provider-kit/index.js';
import { GcpApi, type GcpProviderConfig } from './client.js';
import { defaultGcpProject, listQuery, recordFromSnapshot, resolveGcpTarget, snapshotLabels } from './records.js';
import { restoreGcpDisks } from './restore.js';
import { descriptionTags, isNotFound, lastPath, resourceName } from './util.js';
export { describeGcpError, GCP_LABELS, isRetryableGcpError, labelValue, resourceName } from './util.js';
export type { GcpProviderConfig } from './client.js';

export class GcpProvider implements SnapshotProvider {
  readonly name = 'gcp';
  private readonly api: GcpApi;
  private readonly projectsSeen = new Set<string>();

  constructor(
    ctx: ProviderContext,
    private readonly config: GcpProviderConfig = {},
  ) {
    this.api = new GcpApi(ctx.reporter, config);
  }

  /** Calls retried because GCP throttled them or was unavailable. */
  get throttled(): number {
    return this.api.throttled;
  }

  /** Wait for a zone (string), region ({ region }) or global (undefined) operation until DONE. */
  waitOperation(what: string, project: string, zone: string | { region: string } | undefined, name: string, timeoutMs?: number): Promise<void> {
    return this.api.waitOperation(what, project, zone, name, timeoutMs);
  }

  private defaultProject(): string | undefined {
    return defaultGcpProject(this.config.project);
  }

  async resolve(node: NodeInfo, mapping?: NodeMappingEntry): Promise<NodeTarget | undefined> {
    const target = resolveGcpTarget(node, mapping, this.defaultProject());
    if (target) this.projectsSeen.add(target.location.project!);
    return target;
  }

  async attachedDisks(target: NodeTarget): Promise<MachineDisk[]> {
    const { project, zone } = target.location as { project: string; zone: string };
    const inst = await this.api.getInstance(target);
    const attached = (inst.disks ?? []).filter((d) => d.source && String(d.type ?? 'PERSISTENT') === 'PERSISTENT');
    return Promise.all(
      attached.map(async (d) => {
        const disk = lastPath(d.source);
        const { info } = await this.api.getDisk(project, zone, d.source);
        return {
          disk,
          device: d.deviceName ?? '',
          boot: !!d.boot,
          aliases: [String(d.source)],
          tags: { ...descriptionTags(info.description), ...(info.labels ?? {}) },
          sourceSnapshot: info.sourceSnapshot ?? undefined,
        };
      }),
    );
  }

  async snapshot(target: NodeTarget, tags: SnapshotTags, opts: SnapshotOptions = {}): Promise<SnapshotRecord[]> {
    const { project, zone } = target.location as { project: string; zone: string };
    const inst = await this.api.getInstance(target);
    const attached = (inst.disks ?? []).filter(
      (d) => d.source && String(d.type ?? 'PERSISTENT') === 'PERSISTENT' && (!opts.disks || opts.disks.includes(lastPath(d.source))),
    );
    if (!attached.length) throw new EnvironmentError(`GCP instance ${target.machine} (node ${target.node}) has no persistent disks to snapshot`);
    const guestFlush = !!(opts.consistent ?? this.config.guestFlush);
    const created = new Date().toISOString();
    return Promise.all(
      attached.map(async (d) => {
        const disk = lastPath(d.source);
        const { ref, info: diskInfo } = await this.api.getDisk(project, zone, d.source);
        const name = resourceName('cnr', target.node, d.deviceName ?? disk);
        const labels = snapshotLabels(target, tags, d.deviceName, d.boot);
        const snapshotResource = {
          name,
          labels,
          description: opts.description ?? `cni-rewind backup ${tags.bundleId} node ${tags.node} device ${d.deviceName}`,
        };
        // A regional PD is snapshotted through the regional API (its operation is a region operation);
        // regionDisks.createSnapshot has no guestFlush.
        const res = ref.region
          ? await this.api.call('regionDisks.createSnapshot', (c) => c.regionDisks.createSnapshot({ project, region: ref.region!, disk, snapshotResource }))
          : await this.api.call('disks.createSnapshot', (c) => c.disks.createSnapshot({ project, zone, disk, guestFlush, snapshotResource }));
        const rec: SnapshotRecord = {
          provider: 'gcp',
          node: target.node,
          machine: target.machine,
          disk,
          device: d.deviceName ?? '',
          boot: !!d.boot,
          snapshotId: name,
          sizeGiB: Number(diskInfo.sizeGb ?? d.diskSizeGb ?? 0) || undefined,
          state: 'pending',
          created,
          location: { project, zone, ...(ref.region ? { region: ref.region } : {}) },
          details: {
            operation: this.api.opName(res),
            diskType: diskInfo.type ? lastPath(diskInfo.type) : undefined,
            autoDelete: d.autoDelete,
            guestFlush: guestFlush && !ref.region,
            ...(ref.region ? { replicaZones: (diskInfo.replicaZones ?? []).map(lastPath) } : {}),
          },
        };
        return rec;
      }),
    );
  }

  async waitUsable(records: SnapshotRecord[], opts: WaitOptions): Promise<SnapshotRecord[]> {
    const deadline = Date.now() + opts.timeoutMs;
    const delay = Math.max(0.2, this.config.pollSeconds ?? 5) * 1000;
    const out = await Promise.all(
      records.map(async (r) => {
        const project = r.location!.project!;
        const opName = (r.details as { operation?: string } | undefined)?.operation;
        try {
          const scope = r.location!.region ? { region: r.location!.region } : r.location!.zone;
          if (opName) await this.api.waitOperation(`snapshot of ${r.disk}`, project, scope, opName, Math.max(1000, deadline - Date.now()));
        } catch (err) {
          const rec = { ...r, state: 'failed' as const };
          opts.onProgress?.(rec, errorMessage(err));
          return rec;
        }
        for (;;) {
          let status: string;
          try {
            const [s] = await this.api.call('snapshots.get', (c) => c.snapshots.get({ project, snapshot: r.snapshotId }));
            status = String(s.status);
          } catch (err) {
            if (!isNotFound(err)) throw err;
            status = 'FAILED';
          }
          if (status === 'READY' || status === 'FAILED') {
            const rec: SnapshotRecord = { ...r, state: status === 'READY' ? 'completed' : 'failed' };
            opts.onProgress?.(rec, status);
            return rec;
          }
          opts.onProgress?.(r, status);
          if (Date.now() > deadline) return { ...r, state: 'pending' as const };
          await sleep(delay);
        }
      }),
    );
    throwUnlessUsable('GCP', out, { timeoutMs: opts.timeoutMs, readyWord: 'READY' });
    return out;
  }

  restoreDisks(target: NodeTarget, records: SnapshotRecord[], opts: RestoreDisksOptions): Promise<RestoreDisksResult> {
    return restoreGcpDisks(this.api, target, records, opts);
  }

  async reboot(target: NodeTarget): Promise<void> {
    const { project, zone } = target.location as { project: string; zone: string };
    const res = await this.api.call('instances.reset', (c) => c.instances.reset({ project, zone, instance: target.machine }));
    await this.api.waitOperation(`reset ${target.machine}`, project, zone, this.api.opName(res));
  }

  private projects(): string[] {
    const p = new Set(this.projectsSeen);
    const d = this.defaultProject();
    if (d) p.add(d);
    if (!p.size) throw new BadInputError('GCP: no project to search', { hint: 'set providers.gcp.project in the config file or GOOGLE_CLOUD_PROJECT' });
    return [...p];
  }

  async list(filter: SnapshotFilter): Promise<SnapshotRecord[]> {
    const out: SnapshotRecord[] = [];
    const { want, expr } = listQuery(filter);
    for (const project of this.projects()) {
      const [items] = await this.api.call('snapshots.list', (c) => c.snapshots.list({ project, filter: expr }));
      for (const s of items ?? []) {
        const rec = recordFromSnapshot(s, project, filter, want);
        if (rec) out.push(rec);
      }
    }
    return out;
  }

  async delete(records: SnapshotRecord[]): Promise<void> {
    await deleteEach(
      'GCP',
      records,
      async (r) => {
        const project = r.location?.project ?? this.projects()[0]!;
        const res = await this.api.call('snapshots.delete', (c) => c.snapshots.delete({ project, snapshot: r.snapshotId }));
        await this.api.waitOperation(`delete snapshot ${r.snapshotId}`, project, undefined, this.api.opName(res));
      },
      isNotFound,
    );
  }

  close(): Promise<void> {
    return this.api.close();
  }
}

const gcpProviderModule: ProviderModule = {
  apiVersion: PROVIDER_API_VERSION,
  name: 'gcp',
  create: (ctx) => new GcpProvider(ctx, ctx.config as GcpProviderConfig),
};
export default gcpProviderModule;
