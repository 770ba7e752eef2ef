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
 * Credentials: Application Default Credentials. Config (providers.gcp): project, zone defaults, guestFlush,
 * pollSeconds, and for tests only `endpoint` (http://127.0.0.1:PORT) + `auth: none`.
 *
 * GCE label keys/values must be lowercase [a-z0-9_-] (<= 63 chars): the shared tag keys are mapped
 * (`cni-rewind/bundle-id` -> `cni-rewind-bundle-id`) and values lowercased; the exact bundle id is also in
 * the snapshot description.
 */
import { DisksClient, GlobalOperationsClient, InstancesClient, RegionDisksClient, RegionOperationsClient, SnapshotsClient, ZoneOperationsClient } from '@google-cloud/compute';
import {
  BadInputError,
  defaultRetryPolicy,
  deleteEach,
  EnvironmentError,
  envProxyAgent,
  errorMessage,
  type MachineDisk,
  type NodeInfo,
  type NodeMappingEntry,
  type NodeTarget,
  parseProviderId,
  PROVIDER_API_VERSION,
  type ProviderContext,
  type ProviderModule,
  type RestoreDisksOptions,
  type RestoreDisksResult,
  type RetryPolicy,
  sleep,
  type SnapshotFilter,
  type SnapshotOptions,
  type SnapshotProvider,
  type SnapshotRecord,
  type SnapshotTags,
  TAG_KEYS,
  throwUnlessUsable,
  TOOL_TAG_VALUE,
  type WaitOptions,
  withRetry,
} from '../../src/provider-kit/index.js';
import { describeGcpError, descriptionTags, diskRef, GCP_LABELS, isNotFound, isRetryableGcpError, labelValue, lastPath, resourceName } from './util.js';
export { describeGcpError, GCP_LABELS, isRetryableGcpError, labelValue, resourceName } from './util.js';

export interface GcpProviderConfig {
  project?: string;
  guestFlush?: boolean;
  pollSeconds?: number;
  retryBudgetMs?: number;
  /** Test/private endpoints only: `http://127.0.0.1:PORT` (REST). */
  endpoint?: string;
  /** `none`: send no credentials (only for a local fake). Default: Application Default Credentials. */
  auth?: 'adc' | 'none';
}

/** The scopes the Compute clients ask for by default (used when cni-rewind makes the auth client itself). */
const GCP_SCOPES = ['https://www.googleapis.com/auth/compute', 'https://www.googleapis.com/auth/cloud-platform'];

interface Clients {
  instances: InstancesClient;
  disks: DisksClient;
  snapshots: SnapshotsClient;
  zoneOps: ZoneOperationsClient;
  globalOps: GlobalOperationsClient;
  regionDisks: RegionDisksClient;
  regionOps: RegionOperationsClient;
}

export class GcpProvider implements SnapshotProvider {
  readonly name = 'gcp';
  private clientsPromise?: Promise<Clients>;
  private readonly projectsSeen = new Set<string>();
  private readonly retry: RetryPolicy;
  throttled = 0;

  constructor(
    private readonly ctx: ProviderContext,
    private readonly config: GcpProviderConfig = {},
  ) {
    this.retry = { ...defaultRetryPolicy, initialDelayMs: 500, maxDelayMs: 20_000, maxElapsedMs: config.retryBudgetMs ?? 5 * 60_000 };
  }

  private clients(): Promise<Clients> {
    this.clientsPromise ??= (async () => {
      const opts: Record<string, any> = {} as any;
      if (this.config.endpoint) {
        // The client always sets a port (default 443) and speaks TLS unless told `protocol: 'http'`.
        const u = new URL(this.config.endpoint);
        opts.apiEndpoint = u.hostname;
        opts.port = Number(u.port || (u.protocol === 'http:' ? 80 : 443));
        opts.protocol = u.protocol.replace(':', '');
      }
      // google-gax hands the transporter (gaxios) its own keep-alive agent, which turns off gaxios' proxy
      // support: a request interceptor puts a proxy-aware agent back when a proxy variable is set.
      const proxyAgent = envProxyAgent();
      if (this.config.auth === 'none' || proxyAgent) {
        const { GoogleAuth, PassThroughClient } = await import('google-auth-library');
        let authClient;
        try {
          authClient = this.config.auth === 'none' ? new PassThroughClient() : await new GoogleAuth({ scopes: GCP_SCOPES }).getClient();
        } catch (err) {
          throw describeGcpError('client initialization', err);
        }
        if (proxyAgent) authClient.transporter.interceptors.request.add({ resolved: async (o) => Object.assign(o, { agent: proxyAgent }) });
        opts.authClient = authClient;
      }
      const c: Clients = {
        instances: new InstancesClient(opts as any),
        disks: new DisksClient(opts as any),
        snapshots: new SnapshotsClient(opts as any),
        zoneOps: new ZoneOperationsClient(opts as any),
        globalOps: new GlobalOperationsClient(opts as any),
        regionDisks: new RegionDisksClient(opts as any),
        regionOps: new RegionOperationsClient(opts as any),
      };
      // Auth errors surface here once instead of as an unhandled rejection later (which crashes Node 20).
      try {
        await Promise.all(Object.values(c).map((x: { initialize(): Promise<unknown> }) => x.initialize()));
      } catch (err) {
        throw describeGcpError('client initialization', err);
      }
      return c;
    })();
    this.clientsPromise.catch(() => (this.clientsPromise = undefined));
    return this.clientsPromise;
  }

  private async call<T>(op: string, fn: (c: Clients) => Promise<T>): Promise<T> {
    const c = await this.clients();
    try {
      return await withRetry(() => fn(c), isRetryableGcpError, this.retry, (err, attempt, delay) => {
        this.throttled++;
        this.ctx.reporter.debug('CNR_GCP_RETRY', `GCP ${op} throttled or unavailable (${(err as any)?.code}), retry ${attempt + 1} in ${delay} ms`);
      });
    } catch (err) {
      throw describeGcpError(op, err);
    }
  }

  /** v6 methods resolve to [operation]; the Operation itself is in `latestResponse` (`.promise()` does not exist). */
  private opName(res: unknown): string {
    const first = Array.isArray(res) ? res[0] : res;
    const op = (first as any)?.latestResponse ?? first;
    const name = op?.name;
    if (!name) throw new EnvironmentError('GCP: the API returned no operation');
    return String(name);
  }

  /** Loop on operations.wait until DONE (wait returns early, at most after ~2 min), then fail on op.error. */
  async waitOperation(what: string, project: string, zone: string | { region: string } | undefined, name: string, timeoutMs = 30 * 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const [op] =
        typeof zone === 'object'
          ? await this.call(`wait ${what}`, (c) => c.regionOps.wait({ project, region: zone.region, operation: name }))
          : zone
            ? await this.call(`wait ${what}`, (c) => c.zoneOps.wait({ project, zone, operation: name }))
            : await this.call(`wait ${what}`, (c) => c.globalOps.wait({ project, operation: name }));
      if (String(op.status) === 'DONE') {
        const errs = op.error?.errors ?? [];
        if (errs.length) throw new EnvironmentError(`GCP ${what} failed: ${errs.map((e) => `${e.code}: ${e.message}`).join('; ')}`);
        return;
      }
      if (Date.now() > deadline) throw new EnvironmentError(`GCP ${what}: operation ${name} not done after ${Math.round(timeoutMs / 1000)} s`);
      await sleep(250);
    }
  }

  private defaultProject(): string | undefined {
    return this.config.project ?? process.env.GOOGLE_CLOUD_PROJECT ?? process.env.CLOUDSDK_CORE_PROJECT;
  }

  async resolve(node: NodeInfo, mapping?: NodeMappingEntry): Promise<NodeTarget | undefined> {
    const id = parseProviderId(node.providerID);
    const m = (k: string) => (typeof mapping?.[k] === 'string' ? (mapping[k] as string) : undefined);
    const project = m('project') ?? (id.provider === 'gcp' ? id.project : undefined) ?? this.defaultProject();
    const zone = m('zone') ?? (id.provider === 'gcp' ? id.zone : undefined);
    const instance = m('instance') ?? (id.provider === 'gcp' ? id.instance : undefined);
    if (!instance) return undefined;
    if (!project || !zone) throw new BadInputError(`node ${node.name}: GCP project and zone unknown (set them in the mapping file)`);
    this.projectsSeen.add(project);
    return { node: node.name, provider: 'gcp', machine: instance, location: { project, zone } };
  }

  private async getInstance(t: NodeTarget) {
    const [inst] = await this.call('instances.get', (c) => c.instances.get({ project: t.location.project!, zone: t.location.zone!, instance: t.machine }));
    return inst;
  }

  /** A zonal or a regional persistent disk, through the API of its scope (a regional PD is not found as zonal). */
  private async getDisk(project: string, zone: string, source: string | null | undefined) {
    const ref = diskRef(source);
    const [info] = ref.region
      ? await this.call('regionDisks.get', (c) => c.regionDisks.get({ project: ref.project ?? project, region: ref.region!, disk: ref.disk }))
      : await this.call('disks.get', (c) => c.disks.get({ project: ref.project ?? project, zone: ref.zone ?? zone, disk: ref.disk }));
    return { ref, info };
  }

  async attachedDisks(target: NodeTarget): Promise<MachineDisk[]> {
    const { project, zone } = target.location as { project: string; zone: string };
    const inst = await this.getInstance(target);
    const attached = (inst.disks ?? []).filter((d) => d.source && String(d.type ?? 'PERSISTENT') === 'PERSISTENT');
    return Promise.all(
      attached.map(async (d) => {
        const disk = lastPath(d.source);
        const { info } = await this.getDisk(project, zone, d.source);
        return { disk, device: d.deviceName ?? '', boot: !!d.boot, aliases: [String(d.source)], tags: { ...descriptionTags(info.description), ...(info.labels ?? {}) }, sourceSnapshot: info.sourceSnapshot ?? undefined };
      }),
    );
  }

  async snapshot(target: NodeTarget, tags: SnapshotTags, opts: SnapshotOptions = {}): Promise<SnapshotRecord[]> {
    const { project, zone } = target.location as { project: string; zone: string };
    const inst = await this.getInstance(target);
    const attached = (inst.disks ?? []).filter((d) => d.source && String(d.type ?? 'PERSISTENT') === 'PERSISTENT' && (!opts.disks || opts.disks.includes(lastPath(d.source))));
    if (!attached.length) throw new EnvironmentError(`GCP instance ${target.machine} (node ${target.node}) has no persistent disks to snapshot`);
    const guestFlush = !!(opts.consistent ?? this.config.guestFlush);
    const created = new Date().toISOString();
    return Promise.all(
      attached.map(async (d) => {
        const disk = lastPath(d.source);
        const { ref, info: diskInfo } = await this.getDisk(project, zone, d.source);
        const name = resourceName('cnr', target.node, d.deviceName ?? disk);
        const labels = {
          [GCP_LABELS.tool]: labelValue(TOOL_TAG_VALUE),
          [GCP_LABELS.bundle]: labelValue(tags.bundleId),
          [GCP_LABELS.cluster]: labelValue(tags.clusterId),
          [GCP_LABELS.node]: labelValue(tags.node),
          [GCP_LABELS.machine]: labelValue(target.machine),
          [GCP_LABELS.device]: labelValue(d.deviceName ?? ''),
          [GCP_LABELS.boot]: String(!!d.boot),
        };
        const snapshotResource = { name, labels, description: opts.description ?? `cni-rewind backup ${tags.bundleId} node ${tags.node} device ${d.deviceName}` };
        // A regional PD is snapshotted through the regional API (its operation is a region operation);
        // regionDisks.createSnapshot has no guestFlush.
        const res = ref.region
          ? await this.call('regionDisks.createSnapshot', (c) => c.regionDisks.createSnapshot({ project, region: ref.region!, disk, snapshotResource }))
          : await this.call('disks.createSnapshot', (c) => c.disks.createSnapshot({ project, zone, disk, guestFlush, snapshotResource }));
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
            operation: this.opName(res),
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
          if (opName) await this.waitOperation(`snapshot of ${r.disk}`, project, scope, opName, Math.max(1000, deadline - Date.now()));
        } catch (err) {
          const rec = { ...r, state: 'failed' as const };
          opts.onProgress?.(rec, errorMessage(err));
          return rec;
        }
        for (;;) {
          let status: string;
          try {
            const [s] = await this.call('snapshots.get', (c) => c.snapshots.get({ project, snapshot: r.snapshotId }));
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

  async restoreDisks(target: NodeTarget, records: SnapshotRecord[], opts: RestoreDisksOptions): Promise<RestoreDisksResult> {
    const { project, zone } = target.location as { project: string; zone: string };
    const chosen = records.filter((r) => r.machine === target.machine && (!opts.devices || opts.devices.includes(r.device)));
    const result: RestoreDisksResult = { node: target.node, restored: [], notes: [] };
    if (!chosen.length) {
      result.notes.push('no snapshot records for this machine');
      return result;
    }
    const inst = await this.getInstance(target);
    const byDevice = new Map((inst.disks ?? []).map((d) => [d.deviceName ?? '', d]));
    const labels = { [GCP_LABELS.tool]: labelValue(TOOL_TAG_VALUE), [GCP_LABELS.node]: labelValue(target.node), [GCP_LABELS.restoredBy]: labelValue(opts.runId) };
    // New disks first, while the instance still runs.
    const created = await Promise.all(
      chosen.map(async (r) => {
        const name = resourceName(r.disk.slice(0, 40), 'r');
        const d = (r.details ?? {}) as { diskType?: string; replicaZones?: string[] };
        const region = r.location?.region;
        const sourceSnapshot = `projects/${project}/global/snapshots/${r.snapshotId}`;
        if (region) {
          // A regional PD comes back regional, replicated in the same zones.
          const diskResource = { name, sourceSnapshot, ...(d.diskType ? { type: `regions/${region}/diskTypes/${d.diskType}` } : {}), replicaZones: (d.replicaZones ?? []).map((z) => `projects/${project}/zones/${z}`), labels };
          const res = await this.call('regionDisks.insert', (c) => c.regionDisks.insert({ project, region, diskResource }));
          await this.waitOperation(`create disk ${name}`, project, { region }, this.opName(res));
          return { r, name, source: `projects/${project}/regions/${region}/disks/${name}` };
        }
        const diskResource = { name, sourceSnapshot, ...(d.diskType ? { type: `zones/${zone}/diskTypes/${d.diskType}` } : {}), labels };
        const res = await this.call('disks.insert', (c) => c.disks.insert({ project, zone, diskResource }));
        await this.waitOperation(`create disk ${name}`, project, zone, this.opName(res));
        return { r, name, source: `projects/${project}/zones/${zone}/disks/${name}` };
      }),
    );
    if (String(inst.status) !== 'TERMINATED') {
      const res = await this.call('instances.stop', (c) => c.instances.stop({ project, zone, instance: target.machine }));
      await this.waitOperation(`stop ${target.machine}`, project, zone, this.opName(res));
    }
    for (const { r, name, source } of created) {
      const old = byDevice.get(r.device);
      if (old) {
        const res = await this.call('instances.detachDisk', (c) => c.instances.detachDisk({ project, zone, instance: target.machine, deviceName: r.device }));
        await this.waitOperation(`detach ${r.device}`, project, zone, this.opName(res));
      }
      const res = await this.call('instances.attachDisk', (c) =>
        c.instances.attachDisk({
          project,
          zone,
          instance: target.machine,
          attachedDiskResource: { source, deviceName: r.device, boot: !!(old?.boot ?? r.boot), autoDelete: old?.autoDelete ?? !!(r.details as any)?.autoDelete },
        }),
      );
      await this.waitOperation(`attach ${name} as ${r.device}`, project, zone, this.opName(res));
      const replaced = old ? lastPath(old.source) : undefined;
      if (replaced && opts.deleteReplaced) {
        const oldRef = diskRef(old!.source);
        const del = oldRef.region
          ? await this.call('regionDisks.delete', (c) => c.regionDisks.delete({ project, region: oldRef.region!, disk: replaced }))
          : await this.call('disks.delete', (c) => c.disks.delete({ project, zone, disk: replaced }));
        await this.waitOperation(`delete ${replaced}`, project, oldRef.region ? { region: oldRef.region } : zone, this.opName(del));
        result.notes.push(`deleted replaced disk ${replaced}`);
      } else if (replaced) result.notes.push(`kept replaced disk ${replaced}`);
      result.restored.push({ device: r.device, snapshotId: r.snapshotId, newDisk: name, replacedDisk: replaced });
    }
    const res = await this.call('instances.start', (c) => c.instances.start({ project, zone, instance: target.machine }));
    await this.waitOperation(`start ${target.machine}`, project, zone, this.opName(res));
    return result;
  }

  async reboot(target: NodeTarget): Promise<void> {
    const { project, zone } = target.location as { project: string; zone: string };
    const res = await this.call('instances.reset', (c) => c.instances.reset({ project, zone, instance: target.machine }));
    await this.waitOperation(`reset ${target.machine}`, project, zone, this.opName(res));
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
    const want: Record<string, string> = { [GCP_LABELS.tool]: labelValue(TOOL_TAG_VALUE) };
    if (filter.bundleId) want[GCP_LABELS.bundle] = labelValue(filter.bundleId);
    if (filter.clusterId) want[GCP_LABELS.cluster] = labelValue(filter.clusterId);
    const expr = Object.entries(want).map(([k, v]) => `(labels.${k} = "${v}")`).join(' AND ');
    for (const project of this.projects()) {
      const [items] = await this.call('snapshots.list', (c) => c.snapshots.list({ project, filter: expr }));
      for (const s of items ?? []) {
        const l = (s.labels ?? {}) as Record<string, string>;
        // Filter here too: the filter syntax is server-side best effort, the labels are the truth.
        if (Object.entries(want).some(([k, v]) => l[k] !== v)) continue;
        const created = s.creationTimestamp ? new Date(s.creationTimestamp) : new Date(0);
        if (filter.createdBefore && created >= filter.createdBefore) continue;
        const status = String(s.status);
        out.push({
          provider: 'gcp',
          node: l[GCP_LABELS.node] ?? '',
          machine: l[GCP_LABELS.machine] ?? '',
          disk: lastPath(s.sourceDisk),
          device: l[GCP_LABELS.device] ?? '',
          boot: l[GCP_LABELS.boot] === 'true',
          snapshotId: s.name!,
          sizeGiB: Number(s.diskSizeGb ?? 0) || undefined,
          state: status === 'READY' ? 'completed' : status === 'FAILED' ? 'failed' : 'pending',
          created: created.toISOString(),
          location: { project },
          details: { bundleId: l[GCP_LABELS.bundle], clusterId: l[GCP_LABELS.cluster] },
        });
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
        const res = await this.call('snapshots.delete', (c) => c.snapshots.delete({ project, snapshot: r.snapshotId }));
        await this.waitOperation(`delete snapshot ${r.snapshotId}`, project, undefined, this.opName(res));
      },
      isNotFound,
    );
  }

  async close(): Promise<void> {
    const c = await this.clientsPromise?.catch(() => undefined);
    if (c) await Promise.all(Object.values(c).map((x: { close(): Promise<void> }) => x.close().catch(() => undefined)));
  }
}

const gcpProviderModule: ProviderModule = {
  apiVersion: PROVIDER_API_VERSION,
  name: 'gcp',
  create: (ctx) => new GcpProvider(ctx, ctx.config as GcpProviderConfig),
};
export default gcpProviderModule;
