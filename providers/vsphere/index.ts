/**
 * vSphere snapshot provider, through the vSphere Web Services (SOAP) API from Node: no govc or SDK needed.
 *
 * Config (`providers.vsphere`), each falling back to the govc environment variable in brackets:
 *   url (GOVC_URL)            https://vcenter.example.com/sdk (a bare host gets https:// and /sdk)
 *   username (GOVC_USERNAME), password (GOVC_PASSWORD)   or user:password inside the URL; never printed
 *   caFile (GOVC_TLS_CA_CERTS), insecure (GOVC_INSECURE)  TLS verification is on unless insecure is set
 *   datacenter (GOVC_DATACENTER)   node -> VM path `<datacenter>/vm/<node name>` when the mapping gives none
 *   memory: false, quiesce: false  snapshot RAM (off by default) / quiesce the guest (needs VMware Tools)
 * Nodes whose providerID is `vsphere://<BIOS UUID>` (what the vSphere cloud provider sets) are found with
 * SearchIndex.FindByUuid, in any folder, with no mapping; their machine is that UUID. Otherwise a node mapping
 * entry: { provider: vsphere, vm: 'DC0/vm/folder/name' } (an inventory path), or `<datacenter>/vm/<node>`.
 * An expired session is logged in again once; read calls are retried on transient errors (soap.ts).
 *
 * A snapshot covers every disk of the VM. Reverting a snapshot taken without memory leaves the VM powered
 * off, so a VM that was powered on at snapshot time is powered on again after the revert.
 */
import {
  BadInputError,
  describeTags,
  diskSnapshotId,
  EnvironmentError,
  matchesFilter,
  type NodeInfo,
  type NodeMappingEntry,
  type NodeTarget,
  parseProviderId,
  parseTags,
  PROVIDER_API_VERSION,
  type ProviderContext,
  type ProviderModule,
  registerSecret,
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
import { SoapFault, VimClient, moref, type MoRef } from './soap.js';
import { child, childrenNamed, textOf, type XmlNode } from './xml.js';

export interface VsphereConfig {
  url: URL;
  username: string;
  password: string;
  caFile?: string;
  insecure: boolean;
  datacenter?: string;
  memory: boolean;
  quiesce: boolean;
}

const truthy = (v: unknown) => v === true || (typeof v === 'string' && /^(1|true|yes)$/i.test(v));
const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);

export function parseConfig(raw: Record<string, unknown>, env: NodeJS.ProcessEnv = process.env): VsphereConfig {
  const rawUrl = str(raw.url) ?? str(env.GOVC_URL);
  if (!rawUrl)
    throw new BadInputError('vsphere: no vCenter/ESXi URL', {
      hint: 'Set GOVC_URL (and GOVC_USERNAME, GOVC_PASSWORD) or providers.vsphere.url in the config file.',
    });
  let url: URL;
  try {
    url = new URL(/^[a-z]+:\/\//i.test(rawUrl) ? rawUrl : `https://${rawUrl}`);
  } catch {
    throw new BadInputError('vsphere: the URL is not valid (GOVC_URL or providers.vsphere.url)');
  }
  if (url.pathname === '/' || url.pathname === '') url.pathname = '/sdk';
  const username = str(raw.username) ?? str(env.GOVC_USERNAME) ?? (url.username ? decodeURIComponent(url.username) : undefined);
  const password = str(raw.password) ?? str(env.GOVC_PASSWORD) ?? (url.password ? decodeURIComponent(url.password) : undefined);
  registerSecret(password);
  if (url.password) registerSecret(url.password);
  // Credentials never travel in the URL we keep (it appears in messages).
  url.username = '';
  url.password = '';
  if (!username || !password)
    throw new BadInputError('vsphere: no credentials', {
      hint: 'Set GOVC_USERNAME and GOVC_PASSWORD (or user:password in GOVC_URL, or providers.vsphere.username/password).',
    });
  return {
    url,
    username,
    password,
    caFile: str(raw.caFile) ?? str(env.GOVC_TLS_CA_CERTS),
    insecure: truthy(raw.insecure ?? env.GOVC_INSECURE),
    datacenter: str(raw.datacenter) ?? str(env.GOVC_DATACENTER),
    memory: truthy(raw.memory),
    quiesce: truthy(raw.quiesce),
  };
}

interface SnapshotTreeEntry {
  ref: MoRef;
  name: string;
  description: string;
  created?: Date;
}

function walkTree(nodes: XmlNode[], out: SnapshotTreeEntry[] = []): SnapshotTreeEntry[] {
  for (const n of nodes) {
    const ref = moref(child(n, 'snapshot'));
    if (ref)
      out.push({
        ref,
        name: textOf(n, 'name') ?? '',
        description: textOf(n, 'description') ?? '',
        created: textOf(n, 'createTime') ? new Date(textOf(n, 'createTime')!) : undefined,
      });
    walkTree(childrenNamed(n, 'childSnapshotList'), out);
  }
  return out;
}

interface VmDisk {
  label: string;
  file: string;
  key: string;
  capacityGiB?: number;
}

function disksOf(devices: XmlNode | undefined): VmDisk[] {
  return (devices?.children ?? [])
    .filter((d) => d.attrs.type === 'VirtualDisk')
    .map((d) => {
      const kb = Number(textOf(d, 'capacityInKB') ?? 0);
      return {
        label: textOf(child(d, 'deviceInfo'), 'label') ?? `disk-${textOf(d, 'key')}`,
        file: textOf(child(d, 'backing'), 'fileName') ?? '',
        key: textOf(d, 'key') ?? '',
        capacityGiB: kb ? Math.ceil(kb / 1024 / 1024) : undefined,
      };
    });
}

export class VsphereProvider implements SnapshotProvider {
  readonly name = 'vsphere';
  private readonly vim: VimClient;
  private loggedIn?: Promise<void>;

  constructor(
    private readonly cfg: VsphereConfig,
    private readonly reporter: Reporter,
  ) {
    this.vim = new VimClient(cfg.url, { caFile: cfg.caFile, insecure: cfg.insecure });
    this.vim.onRelogin = () => reporter.debug('CNR_VSPHERE_RELOGIN', `vsphere: the session with ${cfg.url.host} expired; logged in again`);
    if (cfg.insecure) reporter.warn('CNR_VSPHERE_INSECURE', `vsphere: TLS certificate verification is off for ${cfg.url.host} (insecure)`);
  }

  private session(): Promise<void> {
    this.loggedIn ??= this.vim.login(this.cfg.username, this.cfg.password).catch((err) => {
      this.loggedIn = undefined;
      if (err instanceof SoapFault && /InvalidLogin/i.test(`${err.faultType} ${err.faultString}`)) {
        throw new EnvironmentError(`vsphere: login to ${this.cfg.url.host} refused for user ${this.cfg.username}: wrong user name or password`);
      }
      throw err;
    });
    return this.loggedIn;
  }

  private async vmProps(vm: MoRef, paths: string[]): Promise<Map<string, XmlNode>> {
    const [o] = await this.vim.retrieve('VirtualMachine', paths, [vm]);
    if (!o) throw new EnvironmentError(`vsphere: VM ${vm.value} not found`);
    return o.props;
  }

  async resolve(node: NodeInfo, mapping?: NodeMappingEntry): Promise<NodeTarget | undefined> {
    await this.session();
    const id = parseProviderId(node.providerID);
    if (!str(mapping?.vm) && id.provider === 'vsphere') {
      // The SearchIndex finds the VM wherever it sits (any datacenter, any folder): no mapping needed.
      const vm = await this.vim.findVmByUuid(id.uuid);
      return vm ? { node: node.name, provider: this.name, machine: id.uuid, location: { vm: vm.value, host: this.cfg.url.host } } : undefined;
    }
    const path = str(mapping?.vm) ?? (this.cfg.datacenter ? `${this.cfg.datacenter}/vm/${node.name}` : undefined);
    if (!path)
      throw new BadInputError(`vsphere: node ${node.name} has no VM path`, {
        hint: "Give `vm: '<datacenter>/vm/<name>'` in the node mapping file, or set GOVC_DATACENTER / providers.vsphere.datacenter.",
      });
    const vm = await this.vim.findByInventoryPath(path);
    if (!vm) return undefined;
    if (vm.type !== 'VirtualMachine') throw new BadInputError(`vsphere: ${path} is a ${vm.type}, not a VirtualMachine`);
    return { node: node.name, provider: this.name, machine: path, location: { vm: vm.value, host: this.cfg.url.host } };
  }

  private vmRef(target: NodeTarget | SnapshotRecord): MoRef {
    const v = target.location?.vm;
    if (!v) throw new BadInputError(`vsphere: ${target.machine} has no VM reference in its location`);
    return { type: 'VirtualMachine', value: v };
  }

  async snapshot(target: NodeTarget, tags: SnapshotTags, opts: { description?: string; consistent?: boolean } = {}): Promise<SnapshotRecord[]> {
    await this.session();
    const vm = this.vmRef(target);
    const props = await this.vmProps(vm, ['runtime.powerState', 'config.hardware.device']);
    const powerState = props.get('runtime.powerState')?.text.trim();
    const disks = disksOf(props.get('config.hardware.device'));
    const name = snapshotName(tags.bundleId, 80);
    const quiesce = this.cfg.quiesce || (opts.consistent === true && powerState === 'poweredOn');
    const task = await this.vim.startTask('CreateSnapshot_Task', [
      ['_this', vm],
      ['name', name],
      ['description', describeTags(tags, opts.description)],
      ['memory', this.cfg.memory],
      ['quiesce', quiesce],
    ]);
    this.reporter.debug('CNR_VSPHERE_SNAPSHOT', `vsphere: CreateSnapshot_Task ${task.value} for ${target.machine}`);
    const created = new Date().toISOString();
    return (disks.length ? disks : [{ label: 'vm', file: target.machine, key: '' }]).map((d, i) => ({
      provider: this.name,
      node: target.node,
      machine: target.machine,
      disk: d.file,
      device: d.label,
      boot: i === 0,
      // Until the task ends the snapshot has no reference; waitUsable adds it as details.snapshotRef.
      snapshotId: diskSnapshotId(target.machine, name, d.label),
      sizeGiB: (d as VmDisk).capacityGiB,
      state: 'pending',
      created,
      location: { ...target.location },
      details: { task: task.value, snapshot: name, powerState, memory: this.cfg.memory, quiesce },
    }));
  }

  async waitUsable(records: SnapshotRecord[], opts: WaitOptions): Promise<SnapshotRecord[]> {
    await this.session();
    const results = new Map<string, string>();
    const out: SnapshotRecord[] = [];
    for (const r of records) {
      const task = r.details?.task as string | undefined;
      if (r.state === 'completed' || !task) {
        out.push(r);
        continue;
      }
      if (!results.has(task)) {
        const result = await this.vim.waitTask({ type: 'Task', value: task }, `snapshot of ${r.machine}`, {
          timeoutMs: opts.timeoutMs,
          onProgress: (p) => opts.onProgress?.(r, p),
        });
        const snap = moref(result);
        if (!snap) throw new EnvironmentError(`vsphere: the snapshot task ${task} of ${r.machine} succeeded without naming the snapshot`);
        results.set(task, snap.value);
      }
      const { task: _t, ...details } = r.details ?? {};
      out.push({ ...r, state: 'completed', details: { ...details, snapshotRef: results.get(task)! } });
    }
    return out;
  }

  async restoreDisks(target: NodeTarget, records: SnapshotRecord[], opts: RestoreDisksOptions): Promise<RestoreDisksResult> {
    await this.session();
    const mine = records.filter((r) => r.machine === target.machine);
    const names = [...new Set(mine.map((r) => String(r.details?.snapshot ?? '')))];
    if (names.length !== 1 || !names[0]) throw new BadInputError(`vsphere: expected the records of one snapshot for ${target.machine}, found ${names.length}`);
    const vm = this.vmRef(target);
    const ref = (mine[0]!.details?.snapshotRef as string | undefined) ?? (await this.snapshotsOf(vm)).find((s) => s.name === names[0])?.ref.value;
    if (!ref) throw new EnvironmentError(`vsphere: ${target.machine} has no snapshot named ${names[0]}`);
    const snap: MoRef = { type: 'VirtualMachineSnapshot', value: ref };
    const notes: string[] = [];
    if (opts.devices) notes.push('vSphere reverts all disks of a VM together');
    this.reporter.info('CNR_VSPHERE_REVERT', `vsphere: reverting ${target.machine} to snapshot ${snap.value}`);
    let task: MoRef;
    try {
      task = await this.vim.startTask('RevertToSnapshot_Task', [
        ['_this', snap],
        ['suppressPowerOn', false],
      ]);
    } catch (err) {
      if (err instanceof SoapFault && /ManagedObjectNotFound/i.test(`${err.faultType} ${err.faultString}`)) {
        throw new EnvironmentError(`vsphere: snapshot ${snap.value} of ${target.machine} no longer exists`, { cause: err });
      }
      throw err;
    }
    await this.vim.waitTask(task, `revert of ${target.machine}`, { timeoutMs: 30 * 60_000 });
    notes.push(`revert task ${task.value} succeeded`);
    const wasOn = mine[0]!.details?.powerState === 'poweredOn';
    const now = (await this.vmProps(vm, ['runtime.powerState'])).get('runtime.powerState')?.text.trim();
    if (wasOn && now !== 'poweredOn') {
      const on = await this.vim.startTask('PowerOnVM_Task', [['_this', vm]]);
      await this.vim.waitTask(on, `power on of ${target.machine}`, { timeoutMs: 10 * 60_000 });
      notes.push('powered on again (it was on when the snapshot was taken)');
    }
    return { node: target.node, restored: mine.map((r) => ({ device: r.device, snapshotId: r.snapshotId })), notes };
  }

  async reboot(target: NodeTarget): Promise<void> {
    await this.session();
    const vm = this.vmRef(target);
    try {
      await this.vim.call('RebootGuest', [['_this', vm]]);
    } catch (err) {
      // No VMware Tools in the guest: a hard reset is the only way.
      if (!(err instanceof SoapFault)) throw err;
      const t = await this.vim.startTask('ResetVM_Task', [['_this', vm]]);
      await this.vim.waitTask(t, `reset of ${target.machine}`, { timeoutMs: 10 * 60_000 });
    }
  }

  private async snapshotsOf(vm: MoRef): Promise<SnapshotTreeEntry[]> {
    const tree = (await this.vmProps(vm, ['snapshot'])).get('snapshot');
    return tree ? walkTree(childrenNamed(tree, 'rootSnapshotList')) : [];
  }

  async list(filter: SnapshotFilter): Promise<SnapshotRecord[]> {
    await this.session();
    const out: SnapshotRecord[] = [];
    for (const { obj, props } of await this.vim.allVirtualMachines(['name', 'snapshot'])) {
      const tree = props.get('snapshot');
      if (!tree) continue;
      for (const s of walkTree(childrenNamed(tree, 'rootSnapshotList'))) {
        const tags = parseTags(s.description);
        if (!tags || !matchesFilter(tags, s.created, filter)) continue;
        out.push({
          provider: this.name,
          node: tags.node,
          machine: props.get('name')?.text.trim() ?? obj.value,
          disk: 'all',
          device: 'vm',
          snapshotId: diskSnapshotId(props.get('name')?.text.trim() ?? obj.value, s.name, 'vm'),
          state: 'completed',
          created: (s.created ?? new Date(0)).toISOString(),
          location: { vm: obj.value, host: this.cfg.url.host },
          details: { snapshot: s.name, snapshotRef: s.ref.value, bundleId: tags.bundleId, clusterId: tags.clusterId },
        });
      }
    }
    return out;
  }

  async delete(records: SnapshotRecord[]): Promise<void> {
    await this.session();
    const refs = new Set<string>();
    for (const r of records) {
      const known = r.details?.snapshotRef as string | undefined;
      if (known) refs.add(known);
      else if (r.location?.vm && typeof r.details?.snapshot === 'string') {
        const hit = (await this.snapshotsOf({ type: 'VirtualMachine', value: r.location.vm }).catch(() => [])).find((s) => s.name === r.details!.snapshot);
        if (hit) refs.add(hit.ref.value);
      }
    }
    for (const id of refs) {
      let task: MoRef;
      try {
        task = await this.vim.startTask('RemoveSnapshot_Task', [
          ['_this', { type: 'VirtualMachineSnapshot', value: id }],
          ['removeChildren', false],
          ['consolidate', true],
        ]);
      } catch (err) {
        if (err instanceof SoapFault && /ManagedObjectNotFound/i.test(`${err.faultType} ${err.faultString}`)) continue;
        throw err;
      }
      await this.vim.waitTask(task, `removal of snapshot ${id}`, { timeoutMs: 30 * 60_000 });
      this.reporter.debug('CNR_VSPHERE_DELETE', `vsphere: removed snapshot ${id}`);
    }
  }

  async close(): Promise<void> {
    await this.vim.logout();
    this.vim.close();
  }
}

const provider: ProviderModule = {
  apiVersion: PROVIDER_API_VERSION,
  name: 'vsphere',
  create: (ctx: ProviderContext) => new VsphereProvider(parseConfig(ctx.config), ctx.reporter),
};
export default provider;
