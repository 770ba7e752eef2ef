/**
 * Proxmox VE snapshot provider (QEMU VMs), through the REST API with an API token.
 *
 * Config (`providers.proxmox`), each falling back to the environment variable in brackets:
 *   url (PROXMOX_VE_ENDPOINT)        https://pve1.example.com:8006
 *   token (PROXMOX_VE_API_TOKEN)     USER@REALM!TOKENID=SECRET; or tokenFile: a file holding it. Never printed.
 *   caFile (PROXMOX_VE_CA_FILE)      PEM CA/certificate to trust (PVE's self-signed pve-root-ca.pem)
 *   insecure (PROXMOX_VE_INSECURE)   skip TLS verification: only when asked for, and warned about
 *   vmstate: false                   also save RAM in the snapshot
 *   pollIntervalMs: 1000             task polling interval
 * Node mapping entry: { provider: proxmox, node: <PVE node>, vmid: <id> }; without one the VM whose name is the
 * Kubernetes node name is found with GET /cluster/resources?type=vm.
 *
 * A Proxmox snapshot covers all disks and the config of a VM. Rollback stops a running VM; it is started again
 * (`start=1`) when it was running at snapshot time.
 */
import { readFileSync } from 'node:fs';
import {
  BadInputError,
  describeTags,
  diskSnapshotId,
  EnvironmentError,
  hypervisorSnapshot,
  matchesFilter,
  type NodeInfo,
  type NodeMappingEntry,
  type NodeTarget,
  parseTags,
  PROVIDER_API_VERSION,
  type ProviderContext,
  type ProviderModule,
  type Reporter,
  type RestoreDisksOptions,
  type RestoreDisksResult,
  type SnapshotFilter,
  snapshotName,
  type SnapshotProvider,
  type SnapshotRecord,
  type SnapshotTags,
  type WaitOptions,
} from '../../src/provider-kit/index.js';
import { ProxmoxApi, ProxmoxTaskError } from './api.js';

const truthy = (v: unknown) => v === true || (typeof v === 'string' && /^(1|true|yes)$/i.test(v));
const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);

export interface ProxmoxConfig {
  url: URL;
  token: string;
  caFile?: string;
  insecure: boolean;
  vmstate: boolean;
  pollIntervalMs: number;
}

export function parseConfig(raw: Record<string, unknown>, env: NodeJS.ProcessEnv = process.env): ProxmoxConfig {
  const rawUrl = str(raw.url) ?? str(env.PROXMOX_VE_ENDPOINT);
  if (!rawUrl)
    throw new BadInputError('proxmox: no Proxmox VE URL', { hint: 'Set PROXMOX_VE_ENDPOINT (https://HOST:8006) or providers.proxmox.url in the config file.' });
  let url: URL;
  try {
    url = new URL(/^[a-z]+:\/\//i.test(rawUrl) ? rawUrl : `https://${rawUrl}`);
  } catch {
    throw new BadInputError('proxmox: the Proxmox VE URL is not valid');
  }
  url.pathname = '/';
  let token = str(raw.token) ?? str(env.PROXMOX_VE_API_TOKEN);
  const tokenFile = str(raw.tokenFile) ?? str(env.PROXMOX_VE_API_TOKEN_FILE);
  if (!token && tokenFile) {
    try {
      token = readFileSync(tokenFile, 'utf8').trim();
    } catch (err) {
      throw new BadInputError(`proxmox: cannot read the token file ${tokenFile}: ${(err as Error).message}`);
    }
  }
  if (!token)
    throw new BadInputError('proxmox: no API token', { hint: 'Set PROXMOX_VE_API_TOKEN (format USER@REALM!TOKENID=SECRET), or providers.proxmox.tokenFile.' });
  const poll = raw.pollIntervalMs === undefined ? 1_000 : Number(raw.pollIntervalMs);
  if (!Number.isFinite(poll) || poll < 0) throw new BadInputError('proxmox: pollIntervalMs must be a number of milliseconds');
  return {
    url,
    token,
    caFile: str(raw.caFile) ?? str(env.PROXMOX_VE_CA_FILE),
    insecure: truthy(raw.insecure ?? env.PROXMOX_VE_INSECURE),
    vmstate: truthy(raw.vmstate),
    pollIntervalMs: poll,
  };
}

interface ClusterVm {
  type: string;
  vmid: number;
  name?: string;
  node: string;
  status?: string;
}

interface PveSnapshot {
  name: string;
  snaptime?: number;
  description?: string;
  vmstate?: number;
  parent?: string;
}

/** Disk keys of a QEMU VM config (cdroms and empty drives are not disks). */
const DISK_KEY = /^(ide|sata|scsi|virtio|efidisk|tpmstate)\d+$/;

export class ProxmoxProvider implements SnapshotProvider {
  readonly name = 'proxmox';
  private readonly api: ProxmoxApi;

  constructor(
    private readonly cfg: ProxmoxConfig,
    private readonly reporter: Reporter,
  ) {
    this.api = new ProxmoxApi({ url: cfg.url, token: cfg.token, tls: { caFile: cfg.caFile, insecure: cfg.insecure } }, cfg.pollIntervalMs);
    if (cfg.insecure) reporter.warn('CNR_PROXMOX_INSECURE', `proxmox: TLS certificate verification is off for ${cfg.url.host} (insecure)`);
  }

  private vmPath(t: { location?: Record<string, string> }): string {
    const node = t.location?.node;
    const vmid = t.location?.vmid;
    if (!node || !vmid) throw new BadInputError('proxmox: a target/record without node and vmid');
    return `/nodes/${encodeURIComponent(node)}/qemu/${encodeURIComponent(vmid)}`;
  }

  private clusterVms(): Promise<ClusterVm[]> {
    return this.api.get<ClusterVm[]>('/cluster/resources', { type: 'vm' }).then((l) => (l ?? []).filter((v) => v.type === 'qemu'));
  }

  async resolve(node: NodeInfo, mapping?: NodeMappingEntry): Promise<NodeTarget | undefined> {
    const vmidRaw = mapping?.vmid;
    let pveNode = str(mapping?.node) ?? str(mapping?.pveNode);
    let vmid: number | undefined;
    if (vmidRaw !== undefined) {
      vmid = Number(vmidRaw);
      if (!Number.isInteger(vmid) || vmid < 100) throw new BadInputError(`proxmox: node ${node.name}: vmid must be an integer >= 100, not ${String(vmidRaw)}`);
    }
    if (vmid === undefined || !pveNode) {
      const wanted = str(mapping?.name) ?? node.name;
      const vms = await this.clusterVms();
      const hit = vmid !== undefined ? vms.find((v) => v.vmid === vmid) : vms.find((v) => v.name === wanted);
      if (!hit) return undefined;
      const dup = vmid === undefined && vms.filter((v) => v.name === wanted).length > 1;
      if (dup) throw new BadInputError(`proxmox: several VMs are named ${wanted}; give node and vmid for ${node.name} in the mapping file`);
      vmid = hit.vmid;
      pveNode = hit.node;
    }
    return { node: node.name, provider: this.name, machine: String(vmid), location: { node: pveNode!, vmid: String(vmid), host: this.api.host } };
  }

  async snapshot(target: NodeTarget, tags: SnapshotTags, opts: { description?: string } = {}): Promise<SnapshotRecord[]> {
    const base = this.vmPath(target);
    const status = (await this.api.get<{ status?: string }>(`${base}/status/current`))?.status ?? 'unknown';
    const config = (await this.api.get<Record<string, unknown>>(`${base}/config`)) ?? {};
    const disks = Object.entries(config)
      .filter(([k, v]) => DISK_KEY.test(k) && typeof v === 'string' && !/media=cdrom/.test(v) && v !== 'none')
      .map(([k, v]) => ({ device: k, volume: String(v).split(',')[0]!, size: /size=(\d+(?:\.\d+)?)([KMGT])/.exec(String(v)) }));
    if (disks.length === 0) throw new EnvironmentError(`proxmox: VM ${target.machine} on ${target.location.node} has no disks to snapshot`);
    const name = snapshotName(tags.bundleId);
    const upid = await this.api.post<string>(`${base}/snapshot`, {
      snapname: name,
      description: describeTags(tags, opts.description),
      vmstate: this.cfg.vmstate ? 1 : 0,
    });
    this.reporter.debug('CNR_PROXMOX_SNAPSHOT', `proxmox: snapshot ${name} of VM ${target.machine} started (${upid})`);
    const created = new Date().toISOString();
    const gib = (m: RegExpExecArray | null) =>
      m ? Math.ceil(Number(m[1]) * { K: 1 / 1024 ** 2, M: 1 / 1024, G: 1, T: 1024 }[m[2] as 'K' | 'M' | 'G' | 'T']) : undefined;
    return disks.map((d, i) => ({
      provider: this.name,
      node: target.node,
      machine: target.machine,
      disk: d.volume,
      device: d.device,
      boot: i === 0,
      snapshotId: diskSnapshotId(target.machine, name, d.device),
      sizeGiB: gib(d.size),
      state: 'pending',
      created,
      location: { ...target.location },
      details: { snapshot: name, upid, vmStatus: status, vmstate: this.cfg.vmstate },
    }));
  }

  async waitUsable(records: SnapshotRecord[], opts: WaitOptions): Promise<SnapshotRecord[]> {
    const done = new Set<string>();
    for (const r of records) {
      const upid = r.details?.upid as string | undefined;
      if (!upid || done.has(upid) || r.state === 'completed') continue;
      await this.api.waitTask(upid, `snapshot of VM ${r.machine}`, { timeoutMs: opts.timeoutMs, onProgress: (s) => opts.onProgress?.(r, s) });
      done.add(upid);
    }
    return records.map((r) => {
      const { upid: _u, ...details } = r.details ?? {};
      return { ...r, state: 'completed', details };
    });
  }

  private async snapshots(location: Record<string, string>): Promise<PveSnapshot[]> {
    return ((await this.api.get<PveSnapshot[]>(`${this.vmPath({ location })}/snapshot`)) ?? []).filter((s) => s.name !== 'current');
  }

  async restoreDisks(target: NodeTarget, records: SnapshotRecord[], opts: RestoreDisksOptions): Promise<RestoreDisksResult> {
    const mine = records.filter((r) => r.machine === target.machine);
    const names = [...new Set(mine.map((r) => hypervisorSnapshot(r)))];
    if (names.length !== 1) throw new BadInputError(`proxmox: expected the records of one snapshot for VM ${target.machine}, found ${names.length}`);
    const name = names[0]!;
    if (!(await this.snapshots(target.location)).some((s) => s.name === name)) {
      throw new EnvironmentError(`proxmox: VM ${target.machine} on ${target.location.node} has no snapshot ${name}; it was deleted`);
    }
    const wasRunning = mine[0]!.details?.vmStatus === 'running';
    const notes: string[] = [];
    if (opts.devices) notes.push('Proxmox VE rolls back all disks of a VM together');
    this.reporter.info('CNR_PROXMOX_ROLLBACK', `proxmox: rolling VM ${target.machine} back to ${name}${wasRunning ? ' and starting it' : ''}`);
    const upid = await this.api.post<string>(`${this.vmPath(target)}/snapshot/${encodeURIComponent(name)}/rollback`, { start: wasRunning ? 1 : 0 });
    await this.api.waitTask(upid, `rollback of VM ${target.machine}`, { timeoutMs: 30 * 60_000 });
    notes.push(`rollback task ${upid} ended OK`);
    return { node: target.node, restored: mine.map((r) => ({ device: r.device, snapshotId: r.snapshotId })), notes };
  }

  async reboot(target: NodeTarget): Promise<void> {
    const upid = await this.api.post<string>(`${this.vmPath(target)}/status/reboot`);
    await this.api.waitTask(upid, `reboot of VM ${target.machine}`, { timeoutMs: 10 * 60_000 });
  }

  async list(filter: SnapshotFilter): Promise<SnapshotRecord[]> {
    const out: SnapshotRecord[] = [];
    for (const vm of await this.clusterVms()) {
      const location = { node: vm.node, vmid: String(vm.vmid), host: this.api.host };
      for (const s of await this.snapshots(location)) {
        const tags = parseTags(s.description);
        const created = s.snaptime ? new Date(s.snaptime * 1000) : undefined;
        if (!tags || !matchesFilter(tags, created, filter)) continue;
        out.push({
          provider: this.name,
          node: tags.node,
          machine: String(vm.vmid),
          disk: 'all',
          device: 'vm',
          snapshotId: diskSnapshotId(String(vm.vmid), s.name, 'vm'),
          state: 'completed',
          created: (created ?? new Date(0)).toISOString(),
          location,
          details: { snapshot: s.name, vmName: vm.name, bundleId: tags.bundleId, clusterId: tags.clusterId },
        });
      }
    }
    return out;
  }

  async delete(records: SnapshotRecord[]): Promise<void> {
    const seen = new Set<string>();
    for (const r of records) {
      const loc = r.location ?? {};
      const name = hypervisorSnapshot(r);
      const key = `${loc.node}/${loc.vmid}/${name}`;
      if (seen.has(key)) continue;
      seen.add(key);
      // A snapshot (or VM) already gone is not an error: check first, since PVE reports it only inside the task.
      let existing: PveSnapshot[];
      try {
        existing = await this.snapshots(loc);
      } catch (err) {
        if ((err as { status?: number }).status === 500 && /does not exist|not exist/i.test((err as Error).message)) continue;
        throw err;
      }
      if (!existing.some((s) => s.name === name)) continue;
      const upid = await this.api.delete<string>(`${this.vmPath(r)}/snapshot/${encodeURIComponent(name)}`);
      try {
        await this.api.waitTask(upid, `deletion of snapshot ${name} of VM ${r.machine}`, { timeoutMs: 30 * 60_000 });
      } catch (err) {
        if (err instanceof ProxmoxTaskError && /does not exist/i.test(err.exitStatus)) continue;
        throw err;
      }
      this.reporter.debug('CNR_PROXMOX_DELETE', `proxmox: deleted snapshot ${name} of VM ${r.machine}`);
    }
  }

  async close(): Promise<void> {
    this.api.close();
  }
}

const provider: ProviderModule = {
  apiVersion: PROVIDER_API_VERSION,
  name: 'proxmox',
  create: (ctx: ProviderContext) => new ProxmoxProvider(parseConfig(ctx.config), ctx.reporter),
};
export default provider;
