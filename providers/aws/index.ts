/**
 * AWS EC2 snapshot provider (@aws-sdk/client-ec2).
 *
 * Snapshot: one crash-consistent CreateSnapshots call per instance (the volumes the disk policy selects; the
 * others, PersistentVolumes, excluded by id), tagged so the snapshots can be found without the bundle; waited on
 * by one DescribeSnapshots poller per region shared by all nodes (snapshot-watch.ts), so a backup of many nodes
 * does not multiply the polling.
 * Restore: data volumes by create-volume-from-snapshot + stop + detach + attach on the same device + start;
 * the root volume by CreateReplaceRootVolumeTask polled to a final state (or, with `rootRestore: swap`, swapped
 * like a data volume while the instance is stopped). Replaced volumes are kept (tagged) unless deleteReplaced.
 *
 * Credentials, region and endpoint come from the standard AWS chain and environment (AWS_PROFILE,
 * AWS_REGION, AWS_ENDPOINT_URL_EC2, ...): nothing custom. The region of a node is its zone's region as EC2 reports it.
 * Throttling and transient errors (RequestLimitExceeded, HTTP 429/500/502/503/504, timeouts) are retried with
 * backoff (the provider kit's withRetry); CreateSnapshots, which takes no ClientToken, adopts what a lost attempt made.
 *
 * Files: client.ts (clients per region, retried calls, Describe*), errors.ts (retry and error mapping), restore.ts
 * (disk restore), snapshot-watch.ts (the shared snapshot poller).
 */
import {
  CreateSnapshotsCommand,
  CreateTagsCommand,
  DeleteSnapshotCommand,
  DescribeAvailabilityZonesCommand,
  DescribeInstancesCommand,
  DescribeSnapshotsCommand,
  RebootInstancesCommand,
  type Snapshot,
} from '@aws-sdk/client-ec2';
import {
  BadInputError,
  EnvironmentError,
  errorMessage,
  type MachineDisk,
  type NodeInfo,
  type NodeMappingEntry,
  type NodeTarget,
  parseProviderId,
  PROVIDER_API_VERSION,
  type ProviderContext,
  type ProviderModule,
  registerSecret,
  type RestoreDisksOptions,
  type RestoreDisksResult,
  type SnapshotFilter,
  type SnapshotOptions,
  type SnapshotProvider,
  type SnapshotRecord,
  type SnapshotTags,
  TAG_KEYS,
  TOOL_TAG_VALUE,
  type WaitOptions,
} from '../../src/provider-kit/index.js';
import { regionPrefix } from './errors.js';
export { describeAwsError, isRetryableAwsError, regionPrefix } from './errors.js';
import { AwsApi, AWS_TAGS, type AwsProviderConfig, snapshotsTagged, tagsOf, toTags } from './client.js';
import { restoreAwsDisks } from './restore.js';
import { SnapshotWatcher } from './snapshot-watch.js';
export { AWS_TAGS, type AwsProviderConfig } from './client.js';

export class AwsProvider implements SnapshotProvider {
  readonly name = 'aws';
  /** Waits share one DescribeSnapshots poller per region (snapshot-watch.ts). */
  readonly sharedWait = true;
  private readonly api: AwsApi;
  private readonly regionsSeen = new Set<string>();
  private readonly watchers = new Map<string, SnapshotWatcher>();
  private readonly zoneRegions = new Map<string, Promise<string>>();

  constructor(
    private readonly ctx: ProviderContext,
    private readonly config: AwsProviderConfig = {},
  ) {
    this.api = new AwsApi(ctx.reporter, config);
    registerSecret(process.env.AWS_SECRET_ACCESS_KEY);
    registerSecret(process.env.AWS_SESSION_TOKEN);
  }

  /** Throttled calls retried (for progress and the fan-out benchmark). */
  get throttled(): number {
    return this.api.throttled;
  }

  async resolve(node: NodeInfo, mapping?: NodeMappingEntry): Promise<NodeTarget | undefined> {
    const id = parseProviderId(node.providerID);
    let instanceId = typeof mapping?.instanceId === 'string' ? mapping.instanceId : undefined;
    let zone = typeof mapping?.zone === 'string' ? mapping.zone : undefined;
    let region = typeof mapping?.region === 'string' ? mapping.region : undefined;
    if (id.provider === 'aws') {
      instanceId ??= id.instanceId;
      zone ??= id.zone || undefined;
    }
    if (!instanceId) return undefined;
    region ??= zone ? await this.regionOf(zone, instanceId) : (process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION);
    if (!region) throw new BadInputError(`node ${node.name}: no AWS region (providerID has no zone; set region in the mapping file or AWS_REGION)`);
    this.regionsSeen.add(region);
    return { node: node.name, provider: 'aws', machine: instanceId, location: { region, ...(zone ? { zone } : {}) } };
  }

  /**
   * The region of a zone, from EC2: DescribeAvailabilityZones (all zone kinds) in the region the zone name
   * starts with, else the instance's placement found by DescribeInstances there. Cached per zone.
   */
  private regionOf(zone: string, instanceId: string): Promise<string> {
    let p = this.zoneRegions.get(zone);
    if (!p) {
      p = this.lookupRegion(zone, instanceId);
      this.zoneRegions.set(zone, p);
      p.catch(() => this.zoneRegions.delete(zone));
    }
    return p;
  }

  private async lookupRegion(zone: string, instanceId: string): Promise<string> {
    const candidate = regionPrefix(zone);
    if (!candidate) throw new BadInputError(`AWS zone '${zone}' does not start with a region name`, { hint: 'set region in the node mapping file' });
    const zones = await this.api
      .call(candidate, 'DescribeAvailabilityZones', (c) => c.send(new DescribeAvailabilityZonesCommand({ AllAvailabilityZones: true, ZoneNames: [zone] })))
      .catch(() => undefined);
    const known = zones?.AvailabilityZones?.find((z) => z.ZoneName === zone)?.RegionName;
    if (known) return known;
    // The region does not list the zone (an endpoint that knows no Local Zones, or no permission): the
    // instance's own placement decides.
    const out = await this.api.call(candidate, 'DescribeInstances', (c) => c.send(new DescribeInstancesCommand({ InstanceIds: [instanceId] })));
    const placed = out.Reservations?.flatMap((r) => r.Instances ?? [])[0]?.Placement?.AvailabilityZone;
    if (placed !== zone)
      throw new EnvironmentError(`AWS instance ${instanceId} is not in zone ${zone} of region ${candidate}${placed ? ` (it is in ${placed})` : ''}`);
    return candidate;
  }

  async attachedDisks(target: NodeTarget): Promise<MachineDisk[]> {
    const region = target.location.region!;
    const inst = await this.api.describeInstance(region, target.machine);
    const maps = (inst.BlockDeviceMappings ?? []).filter((m) => m.Ebs?.VolumeId);
    const volumes = await this.api.describeVolumes(
      region,
      maps.map((m) => m.Ebs!.VolumeId!),
    );
    return maps.map((m) => {
      const v = volumes.get(m.Ebs!.VolumeId!);
      return {
        disk: m.Ebs!.VolumeId!,
        device: m.DeviceName ?? '',
        boot: m.DeviceName === inst.RootDeviceName,
        tags: tagsOf(v?.Tags),
        sourceSnapshot: v?.SnapshotId || undefined,
      };
    });
  }

  async snapshot(target: NodeTarget, tags: SnapshotTags, opts: SnapshotOptions = {}): Promise<SnapshotRecord[]> {
    const region = target.location.region!;
    const inst = await this.api.describeInstance(region, target.machine);
    const devices = new Map<string, { device: string; deleteOnTermination?: boolean }>();
    for (const m of inst.BlockDeviceMappings ?? [])
      if (m.Ebs?.VolumeId) devices.set(m.Ebs.VolumeId, { device: m.DeviceName ?? '', deleteOnTermination: m.Ebs.DeleteOnTermination });
    if (!devices.size) throw new EnvironmentError(`AWS instance ${target.machine} (node ${target.node}) has no EBS volumes to snapshot`);
    const wanted = new Set(opts.disks ?? devices.keys());
    const rootVolume = [...devices].find(([, d]) => d.device === inst.RootDeviceName)?.[0];
    // One CreateSnapshots call keeps the selected volumes crash-consistent with each other (CreateSnapshot per
    // volume would not); the volumes left out (PersistentVolumes, by the disk policy) are excluded by id.
    const excluded = [...devices.keys()].filter((v) => !wanted.has(v) && v !== rootVolume);
    if (excluded.length > 40)
      throw new EnvironmentError(`AWS instance ${target.machine}: ${excluded.length} volumes to exclude, CreateSnapshots takes at most 40`);
    const volumes = await this.api.describeVolumes(region, [...devices.keys()]);
    const baseTags = {
      [TAG_KEYS.tool]: TOOL_TAG_VALUE,
      [TAG_KEYS.bundle]: tags.bundleId,
      [TAG_KEYS.cluster]: tags.clusterId,
      [TAG_KEYS.node]: tags.node,
      [AWS_TAGS.machine]: target.machine,
      Name: `cni-rewind ${tags.node}`,
    };
    const created = new Date().toISOString();
    let attempts = 0;
    const out = await this.api.call(region, 'CreateSnapshots', async (c) => {
      // CreateSnapshots takes no ClientToken: a retry after an answer that never arrived (a 5xx from a proxy, a
      // cut connection) must not make a second set, of which the bundle would record one and orphan the other.
      if (attempts++ > 0) {
        const earlier = await snapshotsTagged(c, tags.bundleId, tags.node);
        if (earlier.length) return { Snapshots: earlier };
      }
      return c.send(
        new CreateSnapshotsCommand({
          InstanceSpecification: {
            InstanceId: target.machine,
            ExcludeBootVolume: !!rootVolume && !wanted.has(rootVolume),
            ...(excluded.length ? { ExcludeDataVolumeIds: excluded } : {}),
          },
          Description: opts.description ?? `cni-rewind backup ${tags.bundleId} node ${tags.node}`,
          CopyTagsFromSource: 'volume',
          TagSpecifications: [{ ResourceType: 'snapshot', Tags: toTags(baseTags) }],
        }),
      );
    });
    // An endpoint that ignores ExcludeDataVolumeIds (moto 5.2 does) must not leave a snapshot of a volume the
    // policy left out: delete it at once rather than record application data the user did not ask for.
    const unwanted = (out.Snapshots ?? []).filter((s) => !wanted.has(s.VolumeId ?? ''));
    for (const s of unwanted) {
      this.ctx.reporter.debug('CNR_AWS_UNWANTED_SNAPSHOT', `AWS CreateSnapshots also snapshotted excluded volume ${s.VolumeId}: deleting ${s.SnapshotId}`);
      await this.api.call(region, 'DeleteSnapshot', (c) => c.send(new DeleteSnapshotCommand({ SnapshotId: s.SnapshotId! })));
    }
    out.Snapshots = (out.Snapshots ?? []).filter((s) => wanted.has(s.VolumeId ?? ''));
    const records: SnapshotRecord[] = [];
    for (const s of out.Snapshots ?? []) {
      const dev = devices.get(s.VolumeId ?? '');
      const vol = volumes.get(s.VolumeId ?? '');
      const boot = !!dev && dev.device === inst.RootDeviceName;
      records.push({
        provider: 'aws',
        node: target.node,
        machine: target.machine,
        disk: s.VolumeId ?? '',
        device: dev?.device ?? '',
        boot,
        snapshotId: s.SnapshotId!,
        sizeGiB: s.VolumeSize ?? vol?.Size,
        state: s.State === 'completed' ? 'completed' : s.State === 'error' ? 'failed' : 'pending',
        created,
        location: { region, zone: vol?.AvailabilityZone ?? target.location.zone ?? '' },
        details: {
          volumeType: vol?.VolumeType,
          iops: vol?.Iops,
          throughput: vol?.Throughput,
          encrypted: vol?.Encrypted,
          kmsKeyId: vol?.KmsKeyId,
          deleteOnTermination: dev?.deleteOnTermination,
        },
      });
    }
    // Device and boot tags per snapshot: `snapshots list` can then rebuild a restorable record without the bundle.
    try {
      await Promise.all(
        records.map((r) =>
          this.api.call(region, 'CreateTags', (c) =>
            c.send(new CreateTagsCommand({ Resources: [r.snapshotId], Tags: toTags({ [AWS_TAGS.device]: r.device, [AWS_TAGS.boot]: String(!!r.boot) }) })),
          ),
        ),
      );
    } catch (err) {
      // EC2 already made these snapshots: the error carries their records (as waitUsable's does) so the backup
      // records them in the bundle and --cleanup-on-failure can delete them. Without this they were orphaned
      // (found by faults-provider.test.ts: a permanent CreateTags error left them in EC2, unlisted).
      throw Object.assign(err as Error, { records });
    }
    return records;
  }

  async waitUsable(records: SnapshotRecord[], opts: WaitOptions): Promise<SnapshotRecord[]> {
    const byRegion = groupBy(records, (r) => r.location?.region ?? '');
    const deadline = Date.now() + opts.timeoutMs;
    const results: SnapshotRecord[] = [];
    for (const [region, recs] of byRegion) {
      const ids = recs.map((r) => r.snapshotId);
      const stateOf = (s: Snapshot | undefined): SnapshotRecord['state'] =>
        s?.State === 'completed' ? 'completed' : s?.State === 'error' ? 'failed' : s ? 'pending' : 'failed';
      let states: Map<string, Snapshot>;
      try {
        // Polled together with every other node's snapshots in this region (snapshot-watch.ts).
        states = await this.watcher(region).wait(ids, deadline, (now) => {
          // Pending ones only: the final state of each is reported once, below.
          for (const r of recs) if (now.get(r.snapshotId)?.State === 'pending') opts.onProgress?.({ ...r, state: 'pending' }, now.get(r.snapshotId)!.Progress);
        });
      } catch (err) {
        throw Object.assign(err as Error, { records: [...results, ...recs] });
      }
      const regionResults: SnapshotRecord[] = [];
      for (const r of recs) {
        const s = states.get(r.snapshotId);
        const rec: SnapshotRecord = { ...r, state: stateOf(s), sizeGiB: r.sizeGiB ?? s?.VolumeSize };
        opts.onProgress?.(rec, s?.Progress);
        regionResults.push(rec);
      }
      results.push(...regionResults);
      const bad = regionResults.filter((r) => r.state !== 'completed');
      if (bad.length) {
        const failed = bad.filter((r) => r.state === 'failed');
        const what = failed.length
          ? `snapshot(s) ${failed.map((r) => `${r.snapshotId} (${r.device})`).join(', ')} failed${states.get(failed[0]!.snapshotId)?.StateMessage ? `: ${states.get(failed[0]!.snapshotId)!.StateMessage}` : ''}`
          : `snapshot(s) ${bad.map((r) => r.snapshotId).join(', ')} still pending after ${Math.round(opts.timeoutMs / 1000)} s`;
        throw Object.assign(new EnvironmentError(`AWS ${what}`), { records: results });
      }
    }
    return results;
  }

  /** The region's shared snapshot poller. */
  private watcher(region: string): SnapshotWatcher {
    let w = this.watchers.get(region);
    if (!w) {
      w = new SnapshotWatcher((ids) => this.api.describeSnapshots(region, ids), Math.max(1, this.config.pollSeconds ?? 15) * 1000);
      this.watchers.set(region, w);
    }
    return w;
  }

  /** DescribeSnapshots calls made while waiting for snapshots, all regions (for the fan-out benchmark). */
  get waitPolls(): number {
    return [...this.watchers.values()].reduce((n, w) => n + w.polls, 0);
  }

  restoreDisks(target: NodeTarget, records: SnapshotRecord[], opts: RestoreDisksOptions): Promise<RestoreDisksResult> {
    return restoreAwsDisks(this.api, target, records, opts);
  }

  async reboot(target: NodeTarget): Promise<void> {
    await this.api.call(target.location.region!, 'RebootInstances', (c) => c.send(new RebootInstancesCommand({ InstanceIds: [target.machine] })));
  }

  private listRegions(): string[] {
    const r = new Set<string>([...(this.config.regions ?? []), ...this.regionsSeen]);
    const env = process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION;
    if (env) r.add(env);
    if (!r.size) throw new BadInputError('AWS: no region to search', { hint: 'set AWS_REGION or providers.aws.regions in the config file' });
    return [...r];
  }

  async list(filter: SnapshotFilter): Promise<SnapshotRecord[]> {
    const out: SnapshotRecord[] = [];
    for (const region of this.listRegions()) {
      const Filters = [{ Name: `tag:${TAG_KEYS.tool}`, Values: [TOOL_TAG_VALUE] }];
      if (filter.bundleId) Filters.push({ Name: `tag:${TAG_KEYS.bundle}`, Values: [filter.bundleId] });
      if (filter.clusterId) Filters.push({ Name: `tag:${TAG_KEYS.cluster}`, Values: [filter.clusterId] });
      let NextToken: string | undefined;
      do {
        const page = await this.api.call(region, 'DescribeSnapshots', (c) =>
          c.send(new DescribeSnapshotsCommand({ OwnerIds: ['self'], Filters, NextToken, MaxResults: 1000 })),
        );
        for (const s of page.Snapshots ?? []) {
          if (filter.createdBefore && s.StartTime && s.StartTime >= filter.createdBefore) continue;
          const t = tagsOf(s.Tags);
          out.push({
            provider: 'aws',
            node: t[TAG_KEYS.node] ?? '',
            machine: t[AWS_TAGS.machine] ?? '',
            disk: s.VolumeId ?? '',
            device: t[AWS_TAGS.device] ?? '',
            boot: t[AWS_TAGS.boot] === 'true',
            snapshotId: s.SnapshotId!,
            sizeGiB: s.VolumeSize,
            state: s.State === 'completed' ? 'completed' : s.State === 'error' ? 'failed' : 'pending',
            created: (s.StartTime ?? new Date(0)).toISOString(),
            location: { region },
            details: { bundleId: t[TAG_KEYS.bundle], clusterId: t[TAG_KEYS.cluster] },
          });
        }
        NextToken = page.NextToken;
      } while (NextToken);
    }
    return out;
  }

  async delete(records: SnapshotRecord[]): Promise<void> {
    const failures: string[] = [];
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < records.length; i = next++) {
        const r = records[i]!;
        try {
          await this.api.call(r.location?.region ?? this.listRegions()[0]!, 'DeleteSnapshot', (c) =>
            c.send(new DeleteSnapshotCommand({ SnapshotId: r.snapshotId })),
          );
        } catch (err) {
          // Already gone is what we wanted.
          if (/InvalidSnapshot\.NotFound/.test(String((err as any)?.cause?.name ?? '') + errorMessage(err))) continue;
          failures.push(`${r.snapshotId}: ${errorMessage(err)}`);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(8, records.length) }, worker));
    if (failures.length) throw new EnvironmentError(`AWS: ${failures.length} snapshot(s) could not be deleted: ${failures.slice(0, 5).join('; ')}`);
  }

  close(): Promise<void> {
    this.api.close();
    return Promise.resolve();
  }
}

function groupBy<T>(items: T[], key: (t: T) => string): Map<string, T[]> {
  const m = new Map<string, T[]>();
  for (const i of items) {
    const k = key(i);
    m.set(k, [...(m.get(k) ?? []), i]);
  }
  return m;
}

const awsProviderModule: ProviderModule = {
  apiVersion: PROVIDER_API_VERSION,
  name: 'aws',
  create: (ctx) => new AwsProvider(ctx, ctx.config as AwsProviderConfig),
};
export default awsProviderModule;
