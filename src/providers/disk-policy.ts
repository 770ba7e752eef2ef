/**
 * Which disks a node backup covers, and which recorded disks a restore may touch: one policy for every provider.
 *
 * A node backup covers the node's own disks: the boot disk and every disk no PersistentVolume owns. A disk is a
 * PersistentVolume's when a PV of the cluster names it (CSI `volumeHandle`, or the legacy in-tree
 * awsElasticBlockStore / gcePersistentDisk / azureDisk sources), or when its tags/labels say a CSI driver made it
 * for a PV. Device names are never used to decide. PV disks are listed as skipped and snapshotted only with
 * `--include-volumes`: rolling application data back is not what a CNI rollback is for.
 *
 * At restore each record is matched to the live disk by the disk id recorded in the bundle. A recorded disk
 * that is no longer attached (a PV that moved to another node) is left untouched; a device that now holds a
 * different disk than the recorded one (replaced by hand since the backup) is refused, naming both.
 */
import { RefusedError } from '../core/errors.js';
import type { KubeClient } from '../kube/client.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import type { MachineDisk, NodeTarget, SkippedDisk, SnapshotRecord } from '../provider-kit/types.js';

const PV: ResourceType = { group: '', version: 'v1', plural: 'persistentvolumes', kind: 'PersistentVolume', namespaced: false };

/**
 * Tags/labels CSI drivers put on the disks they create for a PV, keyed by the tag, valued by the PV name:
 * aws-ebs-csi-driver (`CSIVolumeName`, `kubernetes.io/created-for/pv/name`), azuredisk-csi-driver
 * (`kubernetes.io-created-for-pv-name`), GCE PD CSI (the same key in the disk description, which the GCP
 * provider turns into tags).
 */
export const PV_TAG_KEYS = ['kubernetes.io/created-for/pv/name', 'CSIVolumeName', 'kubernetes.io-created-for-pv-name'] as const;

/** The disk handles of the cluster's PersistentVolumes, normalized for lookup, each to its PV name. */
export class PvIndex {
  private readonly byHandle = new Map<string, string>();
  constructor(pvs: KubeObject[] = []) {
    for (const pv of pvs) for (const h of pvHandles(pv)) this.byHandle.set(normalizeHandle(h), pv.metadata.name);
  }
  get size(): number {
    return this.byHandle.size;
  }
  /** The PV that owns this disk, by its id, aliases or the tags a CSI driver put on it; undefined: the node's own. */
  owner(d: MachineDisk): { pv: string; by: string } | undefined {
    if (d.boot) return undefined;
    for (const id of [d.disk, ...(d.aliases ?? [])]) {
      const pv = this.byHandle.get(normalizeHandle(id));
      if (pv) return { pv, by: `PersistentVolume ${pv} names it` };
    }
    for (const k of PV_TAG_KEYS) {
      const v = d.tags?.[k];
      if (v) return { pv: v, by: `tag ${k}=${v}` };
    }
    return undefined;
  }
}

export async function loadPvIndex(client: KubeClient): Promise<PvIndex> {
  return new PvIndex(await client.listAll(PV));
}

/** Every disk name a PV spec carries (CSI volumeHandle and the legacy in-tree sources). */
export function pvHandles(pv: KubeObject): string[] {
  const s = (pv.spec ?? {}) as Record<string, any>;
  return [s.csi?.volumeHandle, s.awsElasticBlockStore?.volumeID, s.gcePersistentDisk?.pdName, s.azureDisk?.diskURI].filter(
    (h): h is string => typeof h === 'string' && h.length > 0,
  );
}

/** Case-insensitive; `aws://us-east-1a/vol-1` (legacy EBS) -> `vol-1`; GCE/Azure paths kept whole. */
export function normalizeHandle(h: string): string {
  const lower = h.trim().toLowerCase();
  const aws = /^aws:\/\/[^/]*\/(vol-[0-9a-f]+)$/.exec(lower);
  return aws ? aws[1]! : lower.replace(/^https:\/\/www\.googleapis\.com\/compute\/v1\//, '').replace(/\/+$/, '');
}

export interface DiskSelection {
  /** Disk ids to snapshot. */
  snapshot: string[];
  /** PV disks included (with includeVolumes): disk id -> PV name. */
  volumes: Map<string, string>;
  skipped: SkippedDisk[];
}

export function selectDisks(target: NodeTarget, disks: MachineDisk[], index: PvIndex, includeVolumes: boolean): DiskSelection {
  const sel: DiskSelection = { snapshot: [], volumes: new Map(), skipped: [] };
  for (const d of disks) {
    const owner = index.owner(d);
    if (!owner) sel.snapshot.push(d.disk);
    else if (includeVolumes) {
      sel.snapshot.push(d.disk);
      sel.volumes.set(d.disk, owner.pv);
    } else {
      sel.skipped.push({
        provider: target.provider,
        node: target.node,
        machine: target.machine,
        disk: d.disk,
        device: d.device,
        pv: owner.pv,
        reason: `PersistentVolume disk (${owner.by}); snapshotted only with --include-volumes`,
      });
    }
  }
  return sel;
}

export interface RestoreSelection {
  /** Records to restore, each with `device` set to where its disk is attached now. */
  restore: SnapshotRecord[];
  untouched: { device: string; disk: string; pv?: string; reason: string }[];
}

/**
 * Match recorded disks to the live ones by id. Throws RefusedError (nothing touched yet) when a recorded device
 * now holds a disk that is neither the recorded one nor one created from its snapshot (an earlier restore).
 */
export function matchRecordedDisks(target: NodeTarget, records: SnapshotRecord[], live: MachineDisk[], includeVolumes: boolean): RestoreSelection {
  const out: RestoreSelection = { restore: [], untouched: [] };
  const byId = new Map(live.map((d) => [normalizeHandle(d.disk), d]));
  const byDevice = new Map(live.map((d) => [d.device, d]));
  const refused: string[] = [];
  for (const r of records) {
    if (r.pv && !includeVolumes) {
      out.untouched.push({ device: r.device, disk: r.disk, pv: r.pv, reason: `PersistentVolume ${r.pv} disk; restored only with --include-volumes` });
      continue;
    }
    const same = byId.get(normalizeHandle(r.disk));
    if (same) {
      out.restore.push({ ...r, device: same.device });
      continue;
    }
    const atDevice = byDevice.get(r.device);
    if (atDevice && atDevice.sourceSnapshot && lastSegment(atDevice.sourceSnapshot) === lastSegment(r.snapshotId)) {
      out.restore.push(r); // restored from this very snapshot before: same lineage
      continue;
    }
    if (atDevice) {
      refused.push(`${r.device} now holds ${atDevice.disk}, not ${r.disk} recorded in the bundle`);
      continue;
    }
    out.untouched.push({
      device: r.device,
      disk: r.disk,
      pv: r.pv,
      reason: `${r.disk} is not attached to ${target.machine} any more${r.pv ? ` (PersistentVolume ${r.pv} moved?)` : ''}; left untouched`,
    });
  }
  if (refused.length) {
    throw new RefusedError(`node ${target.node} (${target.machine}): ${refused.join('; ')}`, {
      hint: 'the disk was replaced since the backup; restoring over it would destroy a disk the bundle knows nothing about. Detach it or restore it through the provider console',
    });
  }
  return out;
}

const lastSegment = (s: string) => s.split('/').pop() ?? s;
