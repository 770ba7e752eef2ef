/**
 * Disk restore for the GCP provider: new disks from the snapshots first (while the instance still runs; a regional
 * PD comes back regional in the same replica zones), then stop, detach the old disks, attach the new ones on the same
 * device names (the boot disk as boot), start. Replaced disks are kept unless `deleteReplaced`.
 */
import { type NodeTarget, type RestoreDisksOptions, type RestoreDisksResult, type SnapshotRecord, TOOL_TAG_VALUE } from '../../src/provider-kit/index.js';
import type { GcpApi } from './client.js';
import { diskRef, GCP_LABELS, labelValue, lastPath, resourceName } from './util.js';

export async function restoreGcpDisks(api: GcpApi, target: NodeTarget, records: SnapshotRecord[], opts: RestoreDisksOptions): Promise<RestoreDisksResult> {
  const { project, zone } = target.location as { project: string; zone: string };
  const chosen = records.filter((r) => r.machine === target.machine && (!opts.devices || opts.devices.includes(r.device)));
  const result: RestoreDisksResult = { node: target.node, restored: [], notes: [] };
  if (!chosen.length) {
    result.notes.push('no snapshot records for this machine');
    return result;
  }
  const inst = await api.getInstance(target);
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
        const diskResource = {
          name,
          sourceSnapshot,
          ...(d.diskType ? { type: `regions/${region}/diskTypes/${d.diskType}` } : {}),
          replicaZones: (d.replicaZones ?? []).map((z) => `projects/${project}/zones/${z}`),
          labels,
        };
        const res = await api.call('regionDisks.insert', (c) => c.regionDisks.insert({ project, region, diskResource }));
        await api.waitOperation(`create disk ${name}`, project, { region }, api.opName(res));
        return { r, name, source: `projects/${project}/regions/${region}/disks/${name}` };
      }
      const diskResource = { name, sourceSnapshot, ...(d.diskType ? { type: `zones/${zone}/diskTypes/${d.diskType}` } : {}), labels };
      const res = await api.call('disks.insert', (c) => c.disks.insert({ project, zone, diskResource }));
      await api.waitOperation(`create disk ${name}`, project, zone, api.opName(res));
      return { r, name, source: `projects/${project}/zones/${zone}/disks/${name}` };
    }),
  );
  if (String(inst.status) !== 'TERMINATED') {
    const res = await api.call('instances.stop', (c) => c.instances.stop({ project, zone, instance: target.machine }));
    await api.waitOperation(`stop ${target.machine}`, project, zone, api.opName(res));
  }
  for (const { r, name, source } of created) {
    const old = byDevice.get(r.device);
    if (old) {
      const res = await api.call('instances.detachDisk', (c) => c.instances.detachDisk({ project, zone, instance: target.machine, deviceName: r.device }));
      await api.waitOperation(`detach ${r.device}`, project, zone, api.opName(res));
    }
    const res = await api.call('instances.attachDisk', (c) =>
      c.instances.attachDisk({
        project,
        zone,
        instance: target.machine,
        attachedDiskResource: { source, deviceName: r.device, boot: !!(old?.boot ?? r.boot), autoDelete: old?.autoDelete ?? !!(r.details as any)?.autoDelete },
      }),
    );
    await api.waitOperation(`attach ${name} as ${r.device}`, project, zone, api.opName(res));
    const replaced = old ? lastPath(old.source) : undefined;
    if (replaced && opts.deleteReplaced) {
      const oldRef = diskRef(old!.source);
      const del = oldRef.region
        ? await api.call('regionDisks.delete', (c) => c.regionDisks.delete({ project, region: oldRef.region!, disk: replaced }))
        : await api.call('disks.delete', (c) => c.disks.delete({ project, zone, disk: replaced }));
      await api.waitOperation(`delete ${replaced}`, project, oldRef.region ? { region: oldRef.region } : zone, api.opName(del));
      result.notes.push(`deleted replaced disk ${replaced}`);
    } else if (replaced) result.notes.push(`kept replaced disk ${replaced}`);
    result.restored.push({ device: r.device, snapshotId: r.snapshotId, newDisk: name, replacedDisk: replaced });
  }
  const res = await api.call('instances.start', (c) => c.instances.start({ project, zone, instance: target.machine }));
  await api.waitOperation(`start ${target.machine}`, project, zone, api.opName(res));
  return result;
}
