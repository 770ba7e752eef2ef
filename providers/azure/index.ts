/**
 * Azure snapshot provider (@azure/arm-compute 24 + @azure/identity's DefaultAzureCredential, imported only
 * when the provider is used).
 *
 * Nodes: `azure:///subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/VM` and scale set
 * instances (`.../virtualMachineScaleSets/SS/virtualMachines/ID`), or a mapping entry (subscription,
 * resourceGroup, vm | vmss + instanceId).
 * Snapshot: the OS disk (device `os`) and the data disks (`lun-N`) the disk policy selects, each as an incremental
 * snapshot tagged with the bundle, cluster, node, machine and device, in the disk's resource group (or
 * `snapshotResourceGroup`); the create is a long-running operation polled to its end, then the snapshot is
 * polled until its background copy is done (completionPercent 100): only then is it usable.
 * Restore: new disks from the snapshots (same zone and SKU), the machine deallocated, its OS disk and data disks
 * swapped to the new ones, started. A device that now holds another disk than the recorded one is refused.
 * Throttling (429 + Retry-After) and transient 5xx answers are retried by the SDK's pipeline; HTTPS_PROXY /
 * NO_PROXY are honoured through src/provider-kit/proxy.ts, as for every provider.
 *
 * Config (providers.azure): subscriptionId (for `snapshots list` with no cluster; else AZURE_SUBSCRIPTION_ID),
 * snapshotResourceGroup, pollSeconds, and `endpoint` (another cloud's ARM endpoint, or a local fake in tests).
 */
import {
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
  RefusedError,
  type RestoreDisksOptions,
  type RestoreDisksResult,
  sleep,
  type SnapshotFilter,
  type SnapshotOptions,
  type SnapshotProvider,
  type SnapshotRecord,
  type SnapshotTags,
  throwUnlessUsable,
  TOOL_TAG_VALUE,
  type WaitOptions,
} from '../../src/provider-kit/index.js';
import { AZURE_TAGS, azureName, describeAzureError, deviceOf, isNotFound, lunOf, parseArmId, sameId } from './arm.js';
import { machineOps, type Compute, type MachineOps } from './machine.js';

export { AZURE_TAGS, parseArmId } from './arm.js';

export interface AzureProviderConfig {
  subscriptionId?: string;
  snapshotResourceGroup?: string;
  pollSeconds?: number;
  /** Azure Resource Manager endpoint (default https://management.azure.com); a sovereign cloud, or a test fake. */
  endpoint?: string;
}

interface LiveDisk {
  id: string;
  device: string;
  lun?: number;
}

export class AzureProvider implements SnapshotProvider {
  readonly name = 'azure';
  private credential?: Promise<unknown>;
  private readonly clients = new Map<string, Promise<Compute>>();
  private readonly subscriptionsSeen = new Set<string>();

  constructor(
    private readonly ctx: ProviderContext,
    private readonly config: AzureProviderConfig = {},
  ) {}

  private get pollMs(): number {
    return Math.max(0.1, this.config.pollSeconds ?? 5) * 1000;
  }

  private compute(subscription: string): Promise<Compute> {
    let c = this.clients.get(subscription);
    if (!c) {
      c = (async () => {
        const [{ ComputeManagementClient }, { DefaultAzureCredential }] = await Promise.all([import('@azure/arm-compute'), import('@azure/identity')]);
        // The pipeline's own proxy support checks an IP address target's certificate against "localhost" and reads
        // NO_PROXY its own way: with a proxy variable set, both clients get the agent every provider shares.
        const agent = envProxyAgent();
        this.credential ??= Promise.resolve(new DefaultAzureCredential(agent ? { agent } : {}));
        const credential = (await this.credential) as InstanceType<typeof DefaultAzureCredential>;
        return new ComputeManagementClient(credential, subscription, {
          ...(this.config.endpoint ? { endpoint: this.config.endpoint } : {}),
          ...(agent ? { agent } : {}),
        }) as Compute;
      })();
      this.clients.set(subscription, c);
      c.catch(() => this.clients.delete(subscription));
    }
    return c;
  }

  private async call<T>(op: string, subscription: string, fn: (c: Compute) => Promise<T>): Promise<T> {
    const c = await this.compute(subscription);
    try {
      return await fn(c);
    } catch (err) {
      throw describeAzureError(op, err);
    }
  }

  private machine(t: NodeTarget): MachineOps {
    return machineOps(t, { updateIntervalInMs: this.pollMs }, (op, fn) =>
      this.call(`${op} ${t.machine.split('/').slice(-3).join('/')}`, t.location.subscription!, fn),
    );
  }

  async resolve(node: NodeInfo, mapping?: NodeMappingEntry): Promise<NodeTarget | undefined> {
    const id = parseProviderId(node.providerID);
    const fromId = id.provider === 'azure' ? id : undefined;
    const m = (k: string) => (mapping?.[k] !== undefined ? String(mapping[k]) : undefined);
    const subscription = m('subscription') ?? fromId?.subscription ?? this.config.subscriptionId ?? process.env.AZURE_SUBSCRIPTION_ID;
    const resourceGroup = m('resourceGroup') ?? fromId?.resourceGroup;
    const vm = m('vm') ?? (m('vmss') ? undefined : fromId?.vm);
    const vmss = m('vmss') ?? (m('vm') ? undefined : fromId?.vmss);
    const instanceId = m('instanceId') ?? fromId?.instanceId;
    if (!subscription || !resourceGroup || !(vm || (vmss && instanceId))) return undefined;
    this.subscriptionsSeen.add(subscription);
    const base = `/subscriptions/${subscription}/resourceGroups/${resourceGroup}/providers/Microsoft.Compute`;
    return vm
      ? { node: node.name, provider: 'azure', machine: `${base}/virtualMachines/${vm}`, location: { subscription, resourceGroup, vm } }
      : {
          node: node.name,
          provider: 'azure',
          machine: `${base}/virtualMachineScaleSets/${vmss}/virtualMachines/${instanceId}`,
          location: { subscription, resourceGroup, vmss: vmss!, instanceId: instanceId! },
        };
  }

  private async liveDisks(t: NodeTarget): Promise<LiveDisk[]> {
    const sp = (await this.machine(t).get()).storageProfile ?? {};
    const out: LiveDisk[] = [];
    if (sp.osDisk?.managedDisk?.id) out.push({ id: sp.osDisk.managedDisk.id, device: 'os' });
    for (const d of sp.dataDisks ?? []) if (d.managedDisk?.id) out.push({ id: d.managedDisk.id, device: deviceOf(d.lun), lun: d.lun });
    return out;
  }

  private getDisk(subscription: string, id: string) {
    const { resourceGroup, name } = parseArmId(id);
    return this.call(`get disk ${name}`, subscription, (c) => c.disks.get(resourceGroup, name));
  }

  async attachedDisks(target: NodeTarget): Promise<MachineDisk[]> {
    const sub = target.location.subscription!;
    return Promise.all(
      (await this.liveDisks(target)).map(async (d) => {
        const info = await this.getDisk(sub, d.id);
        return {
          disk: d.id,
          device: d.device,
          boot: d.device === 'os',
          tags: { ...(info.tags ?? {}) },
          sourceSnapshot: info.creationData?.sourceResourceId ?? undefined,
        };
      }),
    );
  }

  async snapshot(target: NodeTarget, tags: SnapshotTags, opts: SnapshotOptions = {}): Promise<SnapshotRecord[]> {
    const sub = target.location.subscription!;
    const disks = (await this.liveDisks(target)).filter((d) => !opts.disks || opts.disks.some((x) => sameId(x, d.id)));
    if (!disks.length) throw new EnvironmentError(`Azure machine ${target.machine} (node ${target.node}) has no managed disks to snapshot`);
    const created = new Date().toISOString();
    const settled = await Promise.allSettled(
      disks.map(async (d): Promise<SnapshotRecord> => {
        const info = await this.getDisk(sub, d.id);
        const diskRef = parseArmId(d.id);
        const rg = this.config.snapshotResourceGroup ?? diskRef.resourceGroup;
        const name = azureName('cnr', target.node, d.device);
        const snapshotTags = {
          [AZURE_TAGS.tool]: TOOL_TAG_VALUE,
          [AZURE_TAGS.bundle]: tags.bundleId,
          [AZURE_TAGS.cluster]: tags.clusterId,
          [AZURE_TAGS.node]: tags.node,
          [AZURE_TAGS.machine]: target.machine,
          [AZURE_TAGS.device]: d.device,
          [AZURE_TAGS.boot]: String(d.device === 'os'),
        };
        // Incremental: only the changed blocks are stored; the copy finishes in the background (completionPercent).
        const snap = await this.call(`create snapshot ${name}`, sub, (c) =>
          c.snapshots.createOrUpdate(
            rg,
            name,
            { location: info.location, tags: snapshotTags, incremental: true, creationData: { createOption: 'Copy', sourceResourceId: d.id } },
            { updateIntervalInMs: this.pollMs },
          ),
        );
        return {
          provider: 'azure',
          node: target.node,
          machine: target.machine,
          disk: d.id,
          device: d.device,
          boot: d.device === 'os',
          snapshotId: snap.id ?? `/subscriptions/${sub}/resourceGroups/${rg}/providers/Microsoft.Compute/snapshots/${name}`,
          sizeGiB: info.diskSizeGB,
          state: 'pending',
          created,
          location: { subscription: sub, resourceGroup: target.location.resourceGroup!, region: info.location },
          details: {
            diskName: diskRef.name,
            diskResourceGroup: diskRef.resourceGroup,
            sku: info.sku?.name,
            zones: info.zones,
            osType: info.osType,
            hyperVGeneration: info.hyperVGeneration,
            lun: d.lun,
          },
        };
      }),
    );
    const records = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw Object.assign(failed.reason instanceof Error ? failed.reason : new EnvironmentError(errorMessage(failed.reason)), { records });
    return records;
  }

  private async snapshotState(r: SnapshotRecord): Promise<{ state: SnapshotRecord['state']; progress: string }> {
    const { subscription, resourceGroup, name } = parseArmId(r.snapshotId);
    try {
      const s = await this.call(`get snapshot ${name}`, subscription, (c) => c.snapshots.get(resourceGroup, name));
      const pct = s.completionPercent ?? 100;
      if (s.provisioningState === 'Failed') return { state: 'failed', progress: 'Failed' };
      if (s.provisioningState === 'Succeeded' && pct >= 100) return { state: 'completed', progress: '100%' };
      return { state: 'pending', progress: `${s.provisioningState ?? '?'} ${pct}%` };
    } catch (err) {
      if (isNotFound(err) || isNotFound((err as { cause?: unknown }).cause)) return { state: 'failed', progress: 'not found' };
      throw err;
    }
  }

  async waitUsable(records: SnapshotRecord[], opts: WaitOptions): Promise<SnapshotRecord[]> {
    const deadline = Date.now() + opts.timeoutMs;
    const out = await Promise.all(
      records.map(async (r) => {
        for (;;) {
          const { state, progress } = await this.snapshotState(r);
          const rec = { ...r, state };
          opts.onProgress?.(rec, progress);
          if (state !== 'pending' || Date.now() > deadline) return rec;
          await sleep(this.pollMs);
        }
      }),
    );
    throwUnlessUsable('Azure', out, { timeoutMs: opts.timeoutMs, name: (r) => parseArmId(r.snapshotId).name });
    return out;
  }

  async restoreDisks(target: NodeTarget, records: SnapshotRecord[], opts: RestoreDisksOptions): Promise<RestoreDisksResult> {
    const sub = target.location.subscription!;
    const chosen = records.filter((r) => sameId(r.machine, target.machine) && (!opts.devices || opts.devices.includes(r.device)));
    const result: RestoreDisksResult = { node: target.node, restored: [], notes: [] };
    if (!chosen.length) {
      result.notes.push('no snapshot records for this machine');
      return result;
    }
    // Each device must still hold the recorded disk (or one made from its snapshot by an earlier restore).
    const live = new Map((await this.liveDisks(target)).map((d) => [d.device, d]));
    const refused: string[] = [];
    for (const r of chosen) {
      const now = live.get(r.device);
      if (!now || sameId(now.id, r.disk)) continue;
      const src = (await this.getDisk(sub, now.id)).creationData?.sourceResourceId;
      if (!sameId(src, r.snapshotId)) refused.push(`${r.device} now holds ${now.id}, not ${r.disk} recorded in the bundle`);
    }
    if (refused.length)
      throw new RefusedError(`node ${target.node} (${target.machine}): ${refused.join('; ')}`, {
        hint: 'the disk was replaced since the backup; detach it or restore it through the Azure portal',
      });

    const tags = { [AZURE_TAGS.tool]: TOOL_TAG_VALUE, [AZURE_TAGS.node]: target.node, [AZURE_TAGS.restoredBy]: opts.runId };
    // New disks first, while the machine still runs.
    const created = await Promise.all(
      chosen.map(async (r) => {
        const d = (r.details ?? {}) as {
          diskName?: string;
          diskResourceGroup?: string;
          sku?: string;
          zones?: string[];
          osType?: string;
          hyperVGeneration?: string;
        };
        const rg = d.diskResourceGroup ?? parseArmId(r.disk).resourceGroup;
        const name = azureName((d.diskName ?? 'disk').slice(0, 50), 'r');
        const disk = await this.call(`create disk ${name}`, sub, (c) =>
          c.disks.createOrUpdate(
            rg,
            name,
            {
              location: r.location?.region ?? '',
              tags,
              ...(d.zones?.length ? { zones: d.zones } : {}),
              ...(d.sku ? { sku: { name: d.sku as never } } : {}),
              ...(r.boot ? { osType: d.osType as never, hyperVGeneration: d.hyperVGeneration as never } : {}),
              creationData: { createOption: 'Copy', sourceResourceId: r.snapshotId },
            },
            { updateIntervalInMs: this.pollMs },
          ),
        );
        return { r, name, id: disk.id ?? `/subscriptions/${sub}/resourceGroups/${rg}/providers/Microsoft.Compute/disks/${name}` };
      }),
    );
    const m = this.machine(target);
    await m.deallocate();
    const replaced = await m.swapDisks(created.map(({ r, id, name }) => ({ lun: lunOf(r.device), id, name })));
    await m.start();
    for (const { r, name } of created) {
      const old = replaced.get(r.device);
      result.restored.push({ device: r.device, snapshotId: r.snapshotId, newDisk: name, replacedDisk: old });
      if (old && opts.deleteReplaced) {
        const { resourceGroup, name: oldName } = parseArmId(old);
        await this.call(`delete disk ${oldName}`, sub, (c) => c.disks.delete(resourceGroup, oldName, { updateIntervalInMs: this.pollMs }));
        result.notes.push(`deleted replaced disk ${oldName}`);
      } else if (old) result.notes.push(`kept replaced disk ${parseArmId(old).name}`);
    }
    return result;
  }

  async reboot(target: NodeTarget): Promise<void> {
    await this.machine(target).restart();
  }

  private subscriptions(): string[] {
    const s = new Set(this.subscriptionsSeen);
    const d = this.config.subscriptionId ?? process.env.AZURE_SUBSCRIPTION_ID;
    if (d) s.add(d);
    if (!s.size)
      throw new EnvironmentError('Azure: no subscription to search', {
        hint: 'set providers.azure.subscriptionId in the config file or AZURE_SUBSCRIPTION_ID',
      });
    return [...s];
  }

  async list(filter: SnapshotFilter): Promise<SnapshotRecord[]> {
    const out: SnapshotRecord[] = [];
    const want: Record<string, string> = { [AZURE_TAGS.tool]: TOOL_TAG_VALUE };
    if (filter.bundleId) want[AZURE_TAGS.bundle] = filter.bundleId;
    if (filter.clusterId) want[AZURE_TAGS.cluster] = filter.clusterId;
    for (const sub of this.subscriptions()) {
      await this.call('list snapshots', sub, async (c) => {
        for await (const s of c.snapshots.list()) {
          const t = (s.tags ?? {}) as Record<string, string>;
          if (Object.entries(want).some(([k, v]) => t[k] !== v)) continue;
          const created = s.timeCreated ? new Date(s.timeCreated) : new Date(0);
          if (filter.createdBefore && created >= filter.createdBefore) continue;
          const pct = s.completionPercent ?? 100;
          out.push({
            provider: 'azure',
            node: t[AZURE_TAGS.node] ?? '',
            machine: t[AZURE_TAGS.machine] ?? '',
            disk: s.creationData?.sourceResourceId ?? '',
            device: t[AZURE_TAGS.device] ?? '',
            boot: t[AZURE_TAGS.boot] === 'true',
            snapshotId: s.id!,
            sizeGiB: s.diskSizeGB,
            state: s.provisioningState === 'Failed' ? 'failed' : s.provisioningState === 'Succeeded' && pct >= 100 ? 'completed' : 'pending',
            created: created.toISOString(),
            location: { subscription: sub, region: s.location },
            details: { bundleId: t[AZURE_TAGS.bundle], clusterId: t[AZURE_TAGS.cluster] },
          });
        }
      });
    }
    return out;
  }

  async delete(records: SnapshotRecord[]): Promise<void> {
    await deleteEach(
      'Azure',
      records,
      async (r) => {
        const { subscription, resourceGroup, name } = parseArmId(r.snapshotId);
        await this.call(`delete snapshot ${name}`, subscription, (c) => c.snapshots.delete(resourceGroup, name, { updateIntervalInMs: this.pollMs }));
      },
      (err) => isNotFound((err as { cause?: unknown }).cause),
    );
  }
}

const azureProviderModule: ProviderModule = {
  apiVersion: PROVIDER_API_VERSION,
  name: 'azure',
  create: (ctx) => new AzureProvider(ctx, ctx.config as AzureProviderConfig),
};
export default azureProviderModule;
