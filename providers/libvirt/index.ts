/**
 * libvirt/KVM snapshot provider, through `virsh` with any libvirt URI.
 *
 * Config (`providers.libvirt` in the config file):
 *   uri: qemu:///system            default URI ($LIBVIRT_DEFAULT_URI, else qemu:///system)
 *   mode: internal | external      internal qcow2 snapshots (default) or disk-only external overlays
 *   externalDir: /path             where external overlays go (default: beside each disk)
 *   virsh: /usr/bin/virsh          the virsh binary
 * Node mapping entry: { provider: libvirt, domain?: <name, default the node name>, uri?: <per-node URI>, mode? }
 *
 * Internal snapshots (`snapshot-create-as`) live inside each qcow2 disk and cover all disks of the domain at
 * once (plus RAM for a running domain); `snapshot-revert` puts the domain back, running or shut off as it was.
 * External disk-only snapshots put an overlay on each disk (atomically); libvirt reverts them only from 9.7 on,
 * which this provider checks against the daemon's version and reports instead of failing obscurely.
 */
import path from 'node:path';
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
  RefusedError,
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
import { Virsh, VirshError, parseDaemonVersion, parseDomainDisks, parseSnapshotXml, type DomainDisk } from './virsh.js';

export type LibvirtMode = 'internal' | 'external';

export interface LibvirtConfig {
  uri?: string;
  mode?: LibvirtMode;
  externalDir?: string;
  virsh?: string;
}

/** libvirt learnt to revert external snapshots in 9.7 (NEWS); 9.0 (Debian 12) says "not supported yet". */
export const EXTERNAL_REVERT_SINCE: [number, number, number] = [9, 7, 0];

const versionAtLeast = (v: [number, number, number], min: [number, number, number]) =>
  v[0] !== min[0] ? v[0] > min[0] : v[1] !== min[1] ? v[1] > min[1] : v[2] >= min[2];
const fmtVersion = (v: [number, number, number]) => v.join('.');

function parseConfig(raw: Record<string, unknown>): LibvirtConfig {
  const mode = raw.mode ?? process.env.CNI_REWIND_LIBVIRT_MODE;
  if (mode !== undefined && mode !== 'internal' && mode !== 'external')
    throw new BadInputError(`libvirt: mode must be 'internal' or 'external', not '${String(mode)}'`);
  for (const k of ['uri', 'externalDir', 'virsh'] as const) {
    if (raw[k] !== undefined && typeof raw[k] !== 'string') throw new BadInputError(`libvirt: '${k}' in the config must be a string`);
  }
  return {
    uri: raw.uri as string | undefined,
    mode: mode as LibvirtMode | undefined,
    externalDir: raw.externalDir as string | undefined,
    virsh: raw.virsh as string | undefined,
  };
}

export class LibvirtProvider implements SnapshotProvider {
  readonly name = 'libvirt';
  private readonly conns = new Map<string, Virsh>();
  /**
   * The URIs this provider may connect to: the configured default and those the node mapping gives (seen by
   * resolve). A URI read from a snapshot record is never connected to on its own say: records come from bundle
   * manifests, and `qemu+ext:///system?command=PROG` makes virsh run PROG.
   */
  private readonly knownUris = new Set<string>();
  private readonly versions = new Map<string, [number, number, number] | undefined>();

  constructor(
    private readonly cfg: LibvirtConfig,
    private readonly reporter: Reporter,
  ) {}

  private get defaultUri(): string {
    return this.cfg.uri ?? process.env.LIBVIRT_DEFAULT_URI ?? 'qemu:///system';
  }

  private virsh(uri: string): Virsh {
    if (uri !== this.defaultUri && !this.knownUris.has(uri)) {
      throw new RefusedError(`libvirt: not connecting to ${uri}: it is neither the configured URI nor one the node mapping gives`, {
        hint: "set it as providers.libvirt.uri in the config file, or as the node's uri in the node mapping file",
      });
    }
    let v = this.conns.get(uri);
    if (!v) this.conns.set(uri, (v = new Virsh(uri, { binary: this.cfg.virsh })));
    return v;
  }

  /** The daemon's libvirt version (undefined if virsh could not tell). */
  async daemonVersion(uri: string): Promise<[number, number, number] | undefined> {
    if (!this.versions.has(uri)) this.versions.set(uri, parseDaemonVersion(await this.virsh(uri).run(['version', '--daemon'])));
    return this.versions.get(uri);
  }

  async resolve(node: NodeInfo, mapping?: NodeMappingEntry): Promise<NodeTarget | undefined> {
    const domain = typeof mapping?.domain === 'string' ? mapping.domain : node.name;
    const uri = typeof mapping?.uri === 'string' ? mapping.uri : this.defaultUri;
    this.knownUris.add(uri);
    const mode = mapping?.mode ?? this.cfg.mode ?? 'internal';
    if (mode !== 'internal' && mode !== 'external') throw new BadInputError(`libvirt: node ${node.name}: mode must be 'internal' or 'external'`);
    try {
      await this.virsh(uri).run(['domstate', domain]);
    } catch (err) {
      if (err instanceof VirshError && /domain not found|no domain with matching name|failed to get domain/i.test(err.virshMessage)) return undefined;
      throw err;
    }
    return { node: node.name, provider: this.name, machine: domain, location: { uri, mode } };
  }

  private async disks(uri: string, domain: string): Promise<DomainDisk[]> {
    const all = parseDomainDisks(await this.virsh(uri).run(['dumpxml', domain]));
    return all.filter((d) => d.device === 'disk' && d.source);
  }

  private async snapshotNames(uri: string, domain: string, kind?: 'internal' | 'external'): Promise<string[]> {
    const args = ['snapshot-list', domain, '--name'];
    if (kind) args.push(`--${kind}`);
    return (await this.virsh(uri).run(args))
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean);
  }

  async snapshot(target: NodeTarget, tags: SnapshotTags, opts: { description?: string; consistent?: boolean } = {}): Promise<SnapshotRecord[]> {
    const { uri } = target.location;
    const mode = (target.location.mode ?? 'internal') as LibvirtMode;
    const domain = target.machine;
    const virsh = this.virsh(uri!);
    const disks = await this.disks(uri!, domain);
    if (disks.length === 0) throw new EnvironmentError(`libvirt: domain ${domain} has no disks to snapshot`);
    const state = (await virsh.run(['domstate', domain])).trim();
    const name = snapshotName(tags.bundleId);
    const args = ['snapshot-create-as', domain, name, '--description', describeTags(tags, opts.description), '--atomic'];

    if (mode === 'internal') {
      const notQcow2 = disks.filter((d) => d.format !== 'qcow2');
      if (notQcow2.length) {
        throw new BadInputError(
          `libvirt: domain ${domain}: internal snapshots need qcow2 disks, but ${notQcow2.map((d) => `${d.target} is ${d.format ?? 'of unknown format'}`).join(', ')}`,
          {
            hint: 'Use external disk-only snapshots (mode: external / --libvirt-mode external) for raw or block disks.',
          },
        );
      }
      if ((await this.snapshotNames(uri!, domain, 'external')).length) {
        throw new RefusedError(
          `libvirt: domain ${domain} already has external snapshots; mixing internal and external snapshots on one domain breaks deleting them`,
          { hint: 'Use mode external for this domain, or delete its external snapshots first.' },
        );
      }
    } else {
      if ((await this.snapshotNames(uri!, domain, 'internal')).length) {
        throw new RefusedError(
          `libvirt: domain ${domain} already has internal snapshots; libvirt cannot delete an external snapshot whose parent is internal`,
          { hint: 'Use mode internal for this domain, or delete its internal snapshots first.' },
        );
      }
      const v = await this.daemonVersion(uri!);
      if (v && !versionAtLeast(v, EXTERNAL_REVERT_SINCE)) {
        this.reporter.warn(
          'CNR_LIBVIRT_LIMIT',
          `libvirt ${fmtVersion(v)} at ${uri} can take external snapshots of ${domain} but cannot revert them (needs ${fmtVersion(EXTERNAL_REVERT_SINCE)}); a restore will need the manual steps in docs/providers-libvirt.md`,
          { uri, version: fmtVersion(v), domain },
        );
      }
      args.push('--disk-only');
      if (opts.consistent && state === 'running') args.push('--quiesce');
      for (const d of disks) {
        const dir = this.cfg.externalDir ?? path.dirname(d.source!);
        args.push('--diskspec', `${d.target},snapshot=external,file=${path.join(dir, `${domain}.${name}.${d.target}.qcow2`)}`);
      }
    }

    const created = new Date().toISOString();
    this.reporter.debug('CNR_LIBVIRT_SNAPSHOT', `libvirt: ${mode} snapshot ${name} of ${domain} (${state}) at ${uri}`);
    try {
      await virsh.run(args);
    } catch (err) {
      if (err instanceof VirshError && /already exists/i.test(err.virshMessage)) {
        throw new RefusedError(`libvirt: domain ${domain} already has a snapshot named ${name} (bundle ${tags.bundleId})`, { cause: err });
      }
      throw err;
    }
    return disks.map((d, i) => ({
      provider: this.name,
      node: target.node,
      machine: domain,
      disk: d.source!,
      device: d.target,
      boot: i === 0,
      snapshotId: diskSnapshotId(domain, name, d.target),
      state: 'completed',
      created,
      location: { uri: uri! },
      details: {
        snapshot: name,
        mode,
        domainState: state,
        format: d.format,
        ...(mode === 'external' ? { overlayDir: this.cfg.externalDir ?? path.dirname(d.source!) } : {}),
      },
    }));
  }

  /** virsh snapshot-create-as returns when the snapshot exists: check it is there. */
  async waitUsable(records: SnapshotRecord[], _opts: WaitOptions): Promise<SnapshotRecord[]> {
    const checked = new Set<string>();
    for (const r of records) {
      const uri = r.location?.uri ?? this.defaultUri;
      const key = `${uri} ${r.machine} ${hypervisorSnapshot(r)}`;
      if (checked.has(key)) continue;
      checked.add(key);
      await this.virsh(uri).run(['snapshot-info', r.machine, hypervisorSnapshot(r)]);
    }
    return records.map((r) => ({ ...r, state: 'completed' }));
  }

  async restoreDisks(target: NodeTarget, records: SnapshotRecord[], opts: RestoreDisksOptions): Promise<RestoreDisksResult> {
    const domain = target.machine;
    const mine = records.filter((r) => r.machine === domain && (!opts.devices || opts.devices.includes(r.device)));
    if (mine.length === 0)
      throw new BadInputError(`libvirt: no snapshot records for domain ${domain}${opts.devices ? ` and devices ${opts.devices.join(',')}` : ''}`);
    const names = [...new Set(mine.map((r) => hypervisorSnapshot(r)))];
    if (names.length > 1)
      throw new BadInputError(`libvirt: records for domain ${domain} name several snapshots (${names.join(', ')}); restore one bundle at a time`);
    const name = names[0]!;
    // The node's URI as resolve found it (config or mapping), never the one the bundle recorded.
    const uri = target.location.uri ?? this.defaultUri;
    const mode = (mine[0]!.details?.mode as LibvirtMode | undefined) ?? 'internal';
    const virsh = this.virsh(uri);
    const notes: string[] = [];

    if (!(await this.snapshotNames(uri, domain)).includes(name)) {
      throw new EnvironmentError(`libvirt: domain ${domain} at ${uri} has no snapshot ${name}; it was deleted or the domain was redefined`);
    }
    if (mode === 'external') {
      const v = await this.daemonVersion(uri);
      if (v && !versionAtLeast(v, EXTERNAL_REVERT_SINCE)) {
        throw new EnvironmentError(
          `libvirt ${fmtVersion(v)} at ${uri} cannot revert external snapshots (libvirt ${fmtVersion(EXTERNAL_REVERT_SINCE)} or later can); domain ${domain} was not changed`,
          {
            hint: 'Upgrade libvirt (Debian 12: bookworm-backports), or revert by hand with the steps in docs/providers-libvirt.md ("external snapshots on libvirt < 9.7").',
          },
        );
      }
    }
    const allDisks = (await this.disks(uri, domain)).map((d) => d.target);
    if (opts.devices && allDisks.some((d) => !opts.devices!.includes(d))) {
      notes.push(`libvirt reverts all disks of ${domain} together; ${allDisks.join(', ')} were reverted`);
    }
    this.reporter.info('CNR_LIBVIRT_REVERT', `libvirt: reverting ${domain} to ${mode} snapshot ${name}`, { uri, domain, snapshot: name });
    // --running/--paused are not passed: the domain returns to the state it had when the snapshot was taken.
    await virsh.run(['snapshot-revert', domain, name]);
    const state = (await virsh.run(['domstate', domain])).trim();
    const current = (await virsh.run(['snapshot-current', domain, '--name']).catch(() => '')).trim();
    if (current && current !== name) notes.push(`current snapshot of ${domain} is ${current}, expected ${name}`);
    notes.push(`domain ${domain} is ${state} after the revert`);
    return { node: target.node, restored: mine.map((r) => ({ device: r.device, snapshotId: r.snapshotId })), notes };
  }

  async reboot(target: NodeTarget): Promise<void> {
    await this.virsh(target.location.uri ?? this.defaultUri).run(['reboot', target.machine]);
  }

  /** Snapshots with cni-rewind's description tags on every domain of the configured URI(s). */
  async list(filter: SnapshotFilter): Promise<SnapshotRecord[]> {
    const uris = new Set([this.defaultUri, ...this.knownUris]);
    const out: SnapshotRecord[] = [];
    for (const uri of uris) {
      const virsh = this.virsh(uri);
      const domains = (await virsh.run(['list', '--all', '--name']))
        .split('\n')
        .map((l) => l.trim())
        .filter(Boolean);
      for (const domain of domains) {
        for (const name of await this.snapshotNames(uri, domain)) {
          const xml = await virsh.run(['snapshot-dumpxml', domain, name]);
          const info = parseSnapshotXml(xml);
          const tags = parseTags(info.description);
          if (!tags || !matchesFilter(tags, info.creationTime, filter)) continue;
          // The snapshot XML lists its disks as <disk name='vda' snapshot='internal|external'>.
          const devices = [...xml.split(/<domain[\s>]/)[0]!.matchAll(/<disk\b[^>]*\bname=['"]([^'"]+)['"][^>]*\bsnapshot=['"](internal|external)['"]/g)].map(
            (m) => m[1]!,
          );
          for (const device of devices.length ? devices : ['all']) {
            out.push({
              provider: this.name,
              node: tags.node,
              machine: domain,
              disk: device,
              device,
              snapshotId: diskSnapshotId(domain, name, device),
              state: 'completed',
              created: (info.creationTime ?? new Date(0)).toISOString(),
              location: { uri },
              details: { snapshot: name, mode: info.kind, bundleId: tags.bundleId, clusterId: tags.clusterId },
            });
          }
        }
      }
    }
    return out;
  }

  async delete(records: SnapshotRecord[]): Promise<void> {
    const seen = new Set<string>();
    for (const r of records) {
      const uri = r.location?.uri ?? this.defaultUri;
      const name = hypervisorSnapshot(r);
      const key = `${uri}\n${r.machine}\n${name}`;
      if (seen.has(key)) continue;
      seen.add(key);
      try {
        await this.virsh(uri).run(['snapshot-delete', r.machine, name]);
        this.reporter.debug('CNR_LIBVIRT_DELETE', `libvirt: deleted snapshot ${name} of ${r.machine}`);
      } catch (err) {
        // Already gone (snapshot or whole domain): not an error for delete.
        if (
          err instanceof VirshError &&
          /snapshot not found|no domain snapshot with matching name|domain not found|no domain with matching name|failed to get domain|failed to get snapshot/i.test(
            err.virshMessage,
          )
        )
          continue;
        throw err;
      }
    }
  }
}

const provider: ProviderModule = {
  apiVersion: PROVIDER_API_VERSION,
  name: 'libvirt',
  create: (ctx: ProviderContext) => new LibvirtProvider(parseConfig(ctx.config), ctx.reporter),
};
export default provider;
