/**
 * The snapshot provider interface: one small, typed contract that every provider implements, built-in
 * (providers/<name>/) or third-party (`--provider-module`). Providers import it through the provider kit
 * (src/provider-kit/, `cni-rewind/provider`) and depend on nothing else but their SDK.
 *
 * Life of a backup: resolve(node) -> NodeTarget; snapshot(target) -> records (pending); waitUsable(records)
 * -> records (completed) or an error; the records go into the bundle manifest. A restore hands the records
 * back to restoreDisks(target, records).
 */
import type { Reporter } from '../io/host.js';

/** The Kubernetes facts a provider may use to find a node's machine. */
export interface NodeInfo {
  name: string;
  providerID?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

/** One entry of the node mapping file (examples/node-mapping.yaml): provider-specific keys beside `provider`. */
export interface NodeMappingEntry {
  provider?: string;
  [key: string]: unknown;
}

/** A node resolved to its machine: what a provider needs to snapshot and restore it. */
export interface NodeTarget {
  node: string;
  provider: string;
  /** Provider's machine id: EC2 instance id, GCE instance name, libvirt domain, Proxmox vmid, vSphere inventory path. */
  machine: string;
  /** Provider-specific location (region/zone/project, libvirt URI, Proxmox node, ...). Plain JSON. */
  location: Record<string, string>;
}

export type SnapshotState = 'pending' | 'completed' | 'failed' | 'deleted';

/** One disk snapshot, as written into the bundle manifest. */
export interface SnapshotRecord {
  provider: string;
  node: string;
  machine: string;
  /** Disk id (EBS volume id, GCE disk name, libvirt target file, ...). */
  disk: string;
  /** Device name the disk is attached as (`/dev/xvda`, `persistent-disk-0`, `vda`, `scsi0`). */
  device: string;
  boot?: boolean;
  snapshotId: string;
  sizeGiB?: number;
  state: SnapshotState;
  /** ISO time the snapshot was started. */
  created: string;
  location?: Record<string, string>;
  /** Anything else the provider needs to restore (volume type, iops, snapshot mode, ...). Plain JSON, no secrets. */
  details?: Record<string, unknown>;
  /** The PersistentVolume this disk belongs to, when it was included with `--include-volumes`. */
  pv?: string;
}

/** One disk attached to a machine, as a provider sees it (for the disk policy, src/providers/disk-policy.ts). */
export interface MachineDisk {
  /** Disk id, the same as SnapshotRecord.disk (EBS volume id, GCE disk name, Azure disk id). */
  disk: string;
  device: string;
  boot?: boolean;
  /** Other names the disk is known by in PersistentVolumes (GCE `projects/P/zones/Z/disks/D`, Azure resource id). */
  aliases?: string[];
  /** The disk's tags/labels (CSI drivers mark the disks they create for a PersistentVolume). */
  tags?: Record<string, string>;
  /** The snapshot the disk was created from, if any (a disk restored by cni-rewind comes from the recorded one). */
  sourceSnapshot?: string;
}

/** A disk a backup did not snapshot, listed in the manifest (`skippedDisks`). */
export interface SkippedDisk {
  provider: string;
  node: string;
  machine: string;
  disk: string;
  device: string;
  /** The PersistentVolume that owns it. */
  pv: string;
  reason: string;
}

/** Tags/labels put on every snapshot, so snapshots can be found without the bundle. */
export interface SnapshotTags {
  bundleId: string;
  clusterId: string;
  node: string;
}
/** Tag keys, shared by all providers (providers with stricter label syntax map them, see each provider). */
export const TAG_KEYS = { tool: 'cni-rewind', bundle: 'cni-rewind/bundle-id', cluster: 'cni-rewind/cluster-id', node: 'cni-rewind/node' } as const;
export const TOOL_TAG_VALUE = 'cni-rewind';

export interface SnapshotOptions {
  description?: string;
  consistent?: boolean;
  /** Snapshot only these disks (MachineDisk.disk ids); undefined: every disk. Given only to providers with attachedDisks(). */
  disks?: string[];
}

export interface WaitOptions {
  timeoutMs: number;
  onProgress?: (record: SnapshotRecord, progress?: string) => void;
}

export interface RestoreDisksOptions {
  /** Delete the volumes/disks the restore replaced (default: keep them, tagged). */
  deleteReplaced?: boolean;
  /** A run id for idempotency tokens and tags on what the restore creates. */
  runId: string;
  /** Restore only these devices (default: all recorded). */
  devices?: string[];
}

export interface RestoreDisksResult {
  node: string;
  restored: { device: string; snapshotId: string; newDisk?: string; replacedDisk?: string }[];
  notes: string[];
}

export interface SnapshotFilter {
  bundleId?: string;
  clusterId?: string;
  /** Only snapshots created before this time (for `--older-than`). */
  createdBefore?: Date;
}

export interface SnapshotProvider {
  readonly name: string;
  /** The machine behind a node, or undefined when this provider cannot resolve it. */
  resolve(node: NodeInfo, mapping?: NodeMappingEntry): Promise<NodeTarget | undefined>;
  /**
   * Start snapshots of every disk of the machine. Returns records, typically `pending`. When it fails after some
   * snapshots were made, the error carries them as `records` (like waitUsable's) so the backup records them.
   */
  snapshot(target: NodeTarget, tags: SnapshotTags, opts?: SnapshotOptions): Promise<SnapshotRecord[]>;
  /**
   * The machine's attached disks. Providers that have it let the engine choose which disks to snapshot (the
   * disk policy: PersistentVolume disks are left out unless asked) and check at restore that each recorded disk
   * is still the one attached; providers without it snapshot and restore whole machines (libvirt, Proxmox, vSphere: their snapshots are per VM).
   */
  attachedDisks?(target: NodeTarget): Promise<MachineDisk[]>;
  /** Wait until every record is usable (`completed`); throws when one fails or the timeout passes. */
  waitUsable(records: SnapshotRecord[], opts: WaitOptions): Promise<SnapshotRecord[]>;
  /** Put the machine's disks back to the snapshots (stopping/starting the machine as the provider needs). */
  restoreDisks(target: NodeTarget, records: SnapshotRecord[], opts: RestoreDisksOptions): Promise<RestoreDisksResult>;
  /**
   * Optional: reboot the machine (used by plan's rolling node step, `--reboot-nodes`). A provider without it
   * still backs up and restores; a plan that would reboot its nodes fails its `node-providers` check.
   */
  reboot?(target: NodeTarget): Promise<void>;
  /** Snapshots this tool made, found by their tags. */
  list(filter: SnapshotFilter): Promise<SnapshotRecord[]>;
  /** Delete snapshots; already-deleted ones are not an error. */
  delete(records: SnapshotRecord[]): Promise<void>;
  /** Release connections, child processes. */
  close?(): Promise<void>;
  /**
   * Optional: true when concurrent waitUsable calls share their polling (as the aws provider's do), so a backup may
   * wait for every node at once instead of holding one of its `--concurrency` slots per waiting node.
   */
  readonly sharedWait?: boolean;
}

/** What the engine hands a provider when creating it. */
export interface ProviderContext {
  reporter: Reporter;
  /** Provider section of the config file (`providers.<name>`), plain data. */
  config: Record<string, unknown>;
}

/**
 * What a provider module exports (built-in or third-party): `export default { name, create }` or a named
 * export `provider`. `apiVersion` lets the loader refuse a module written for an incompatible interface.
 */
export interface ProviderModule {
  apiVersion: 'cni-rewind.provider/v1';
  name: string;
  create(ctx: ProviderContext): Promise<SnapshotProvider> | SnapshotProvider;
}

export const PROVIDER_API_VERSION = 'cni-rewind.provider/v1';
