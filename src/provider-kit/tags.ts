/**
 * Hypervisor snapshots (libvirt, Proxmox VE, vSphere) have a name and a free-text description but no tags,
 * so cni-rewind writes its tags into the description in one fixed, parseable form:
 *   cni-rewind bundle=<bundle id> cluster=<cluster uid> node=<node name>[ <free text>]
 * and `list` finds its snapshots by parsing it back. Shared by the three hypervisor providers.
 */
import { createHash } from 'node:crypto';
import type { SnapshotFilter, SnapshotTags } from './types.js';
import { TOOL_TAG_VALUE } from './types.js';

export function describeTags(tags: SnapshotTags, text?: string): string {
  const clean = (v: string) => v.replace(/\s+/g, '_');
  return `${TOOL_TAG_VALUE} bundle=${clean(tags.bundleId)} cluster=${clean(tags.clusterId)} node=${clean(tags.node)}${text ? ` ${text.replace(/\s+/g, ' ')}` : ''}`;
}

export function parseTags(description: string | undefined): SnapshotTags | undefined {
  const m = /^cni-rewind bundle=(\S+) cluster=(\S+) node=(\S+)/.exec(description?.trim() ?? '');
  return m ? { bundleId: m[1]!, clusterId: m[2]!, node: m[3]! } : undefined;
}

export function matchesFilter(tags: SnapshotTags, created: Date | undefined, filter: SnapshotFilter): boolean {
  if (filter.bundleId && tags.bundleId !== filter.bundleId) return false;
  if (filter.clusterId && tags.clusterId !== filter.clusterId) return false;
  if (filter.createdBefore && (!created || created >= filter.createdBefore)) return false;
  return true;
}

/** A snapshot name every hypervisor accepts (Proxmox is the strictest: [a-z][a-z0-9_-]{1,39}). */
export function snapshotName(bundleId: string, maxLen = 40): string {
  const base = `cnr-${bundleId.toLowerCase().replace(/[^a-z0-9_-]+/g, '-')}`;
  if (base.length <= maxLen) return base;
  // Too long: keep a readable prefix and make it unique with a hash of the whole id.
  return `${base.slice(0, maxLen - 9)}-${createHash('sha256').update(bundleId).digest('hex').slice(0, 8)}`;
}

/**
 * A hypervisor snapshot covers every disk of a VM, but a SnapshotRecord is one disk snapshot and the engine
 * tells records apart by `snapshotId` alone (src/backup/backup.ts replaceRecords). So the record id is
 * `<machine>/<snapshot name or ref>/<device>`, unique per disk; the hypervisor's own snapshot name is also in
 * `details.snapshot`.
 */
export function diskSnapshotId(machine: string, snapshot: string, device: string): string {
  return `${machine}/${snapshot}/${device}`;
}

/** The hypervisor snapshot name/ref of a record (details.snapshot, else the middle part of the id). */
export function hypervisorSnapshot(record: { snapshotId: string; details?: Record<string, unknown> }): string {
  const d = record.details?.snapshot;
  if (typeof d === 'string' && d) return d;
  const parts = record.snapshotId.split('/');
  return parts.length >= 3 ? parts.slice(1, -1).join('/') : record.snapshotId;
}
