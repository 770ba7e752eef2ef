/**
 * Disk restore for the AWS provider. Data volumes (and the root volume with `rootRestore: swap`): new volumes from
 * the snapshots first while the instance runs, then stop, detach, attach on the same device, put DeleteOnTermination
 * back, start. The root volume by default: CreateReplaceRootVolumeTask, polled to a final state. Replaced volumes
 * are kept and tagged unless `deleteReplaced`.
 */
import {
  AttachVolumeCommand,
  CreateReplaceRootVolumeTaskCommand,
  CreateTagsCommand,
  CreateVolumeCommand,
  DeleteVolumeCommand,
  DescribeReplaceRootVolumeTasksCommand,
  DetachVolumeCommand,
  ModifyInstanceAttributeCommand,
  StartInstancesCommand,
  StopInstancesCommand,
  waitUntilInstanceRunning,
  waitUntilInstanceStopped,
  waitUntilVolumeAvailable,
  waitUntilVolumeInUse,
} from '@aws-sdk/client-ec2';
import {
  EnvironmentError,
  type NodeTarget,
  type RestoreDisksOptions,
  type RestoreDisksResult,
  sleep,
  type SnapshotRecord,
  TAG_KEYS,
  TOOL_TAG_VALUE,
} from '../../src/provider-kit/index.js';
import { AWS_TAGS, type AwsApi, toTags } from './client.js';

export async function restoreAwsDisks(api: AwsApi, target: NodeTarget, records: SnapshotRecord[], opts: RestoreDisksOptions): Promise<RestoreDisksResult> {
  const region = target.location.region!;
  const chosen = records.filter((r) => r.machine === target.machine && (!opts.devices || opts.devices.includes(r.device)));
  const result: RestoreDisksResult = { node: target.node, restored: [], notes: [] };
  if (!chosen.length) {
    result.notes.push('no snapshot records for this machine');
    return result;
  }
  const inst = await api.describeInstance(region, target.machine);
  const zone = inst.Placement?.AvailabilityZone ?? target.location.zone;
  if (!zone) throw new EnvironmentError(`AWS instance ${target.machine}: no availability zone`);
  const attached = new Map((inst.BlockDeviceMappings ?? []).map((m) => [m.DeviceName ?? '', m]));
  const rootMode = api.config.rootRestore ?? 'replace-root-task';
  const root = chosen.find((r) => r.boot || r.device === inst.RootDeviceName);
  const swaps = chosen.filter((r) => r !== root || rootMode === 'swap');
  if (root && rootMode === 'skip') result.notes.push(`root volume ${root.device} not restored (rootRestore: skip)`);
  const runTags = { [TAG_KEYS.tool]: TOOL_TAG_VALUE, [TAG_KEYS.node]: target.node, [AWS_TAGS.restoredBy]: opts.runId };

  if (swaps.length) {
    // Create the new volumes first (the instance keeps running meanwhile), then stop, swap, start.
    const created: { rec: SnapshotRecord; volumeId: string }[] = [];
    for (const rec of swaps) {
      const d = (rec.details ?? {}) as { volumeType?: string; iops?: number; throughput?: number; encrypted?: boolean; kmsKeyId?: string };
      const v = await api.call(region, 'CreateVolume', (c) =>
        c.send(
          new CreateVolumeCommand({
            AvailabilityZone: zone,
            SnapshotId: rec.snapshotId,
            VolumeType: d.volumeType as any,
            Iops: d.volumeType === 'io1' || d.volumeType === 'io2' || d.volumeType === 'gp3' ? d.iops : undefined,
            Throughput: d.volumeType === 'gp3' ? d.throughput : undefined,
            ...(d.kmsKeyId ? { Encrypted: true, KmsKeyId: d.kmsKeyId } : {}),
            ClientToken: `${opts.runId}-${rec.snapshotId}`.slice(0, 64),
            TagSpecifications: [{ ResourceType: 'volume', Tags: toTags({ ...runTags, Name: `cni-rewind restore ${target.node} ${rec.device}` }) }],
          }),
        ),
      );
      created.push({ rec, volumeId: v.VolumeId! });
    }
    await waitUntilVolumeAvailable({ client: api.client(region), maxWaitTime: 900, ...api.pollDelays() }, { VolumeIds: created.map((c) => c.volumeId) });
    const state = inst.State?.Name;
    if (state !== 'stopped') {
      await api.call(region, 'StopInstances', (c) => c.send(new StopInstancesCommand({ InstanceIds: [target.machine] })));
      await waitUntilInstanceStopped({ client: api.client(region), maxWaitTime: 900, ...api.pollDelays() }, { InstanceIds: [target.machine] });
    }
    for (const { rec, volumeId } of created) {
      const old = attached.get(rec.device)?.Ebs?.VolumeId;
      if (old) {
        await api.call(region, 'DetachVolume', (c) => c.send(new DetachVolumeCommand({ VolumeId: old, InstanceId: target.machine, Device: rec.device })));
        await waitUntilVolumeAvailable({ client: api.client(region), maxWaitTime: 900, ...api.pollDelays() }, { VolumeIds: [old] });
      } else result.notes.push(`${rec.device} was not attached any more; attaching the restored volume there`);
      await api.call(region, 'AttachVolume', (c) => c.send(new AttachVolumeCommand({ VolumeId: volumeId, InstanceId: target.machine, Device: rec.device })));
      await waitUntilVolumeInUse({ client: api.client(region), maxWaitTime: 900, ...api.pollDelays() }, { VolumeIds: [volumeId] });
      // AttachVolume leaves DeleteOnTermination false: put the original setting back.
      const dot = attached.get(rec.device)?.Ebs?.DeleteOnTermination ?? (rec.details as any)?.deleteOnTermination;
      if (dot) {
        await api.call(region, 'ModifyInstanceAttribute', (c) =>
          c.send(
            new ModifyInstanceAttributeCommand({
              InstanceId: target.machine,
              BlockDeviceMappings: [{ DeviceName: rec.device, Ebs: { DeleteOnTermination: true } }],
            }),
          ),
        );
      }
      if (old) await disposeReplaced(api, region, old, opts, result);
      result.restored.push({ device: rec.device, snapshotId: rec.snapshotId, newDisk: volumeId, replacedDisk: old });
    }
    await api.call(region, 'StartInstances', (c) => c.send(new StartInstancesCommand({ InstanceIds: [target.machine] })));
    await waitUntilInstanceRunning({ client: api.client(region), maxWaitTime: 900, ...api.pollDelays() }, { InstanceIds: [target.machine] });
  }

  if (root && rootMode === 'replace-root-task') {
    // The instance must be running; the task swaps the root volume in place and restarts the guest OS.
    const oldRoot = attached.get(root.device)?.Ebs?.VolumeId;
    const task = await api.call(region, 'CreateReplaceRootVolumeTask', (c) =>
      c.send(
        new CreateReplaceRootVolumeTaskCommand({
          InstanceId: target.machine,
          SnapshotId: root.snapshotId,
          DeleteReplacedRootVolume: !!opts.deleteReplaced,
          ClientToken: `${opts.runId}-${target.machine}`.slice(0, 64),
          TagSpecifications: [{ ResourceType: 'replace-root-volume-task', Tags: toTags(runTags) }],
        }),
      ),
    );
    const taskId = task.ReplaceRootVolumeTask?.ReplaceRootVolumeTaskId;
    if (!taskId) throw new EnvironmentError(`AWS CreateReplaceRootVolumeTask for ${target.machine} returned no task id`);
    const final = await pollReplaceRootTask(api, region, taskId);
    if (final !== 'succeeded') throw new EnvironmentError(`AWS replace-root-volume task ${taskId} for ${target.machine} ended ${final}`);
    const after = await api.describeInstance(region, target.machine);
    const newRoot = after.BlockDeviceMappings?.find((m) => m.DeviceName === after.RootDeviceName)?.Ebs?.VolumeId;
    if (newRoot && oldRoot && newRoot !== oldRoot) {
      await api.call(region, 'CreateTags', (c) => c.send(new CreateTagsCommand({ Resources: [newRoot], Tags: toTags(runTags) })));
      if (!opts.deleteReplaced)
        await api
          .call(region, 'CreateTags', (c) => c.send(new CreateTagsCommand({ Resources: [oldRoot], Tags: toTags({ [AWS_TAGS.replacedBy]: opts.runId }) })))
          .catch(() => undefined);
    }
    result.restored.push({ device: root.device, snapshotId: root.snapshotId, newDisk: newRoot, replacedDisk: oldRoot });
    result.notes.push(`root volume replaced by task ${taskId}`);
  }
  return result;
}

/** Poll DescribeReplaceRootVolumeTasks (there is no SDK waiter) until a final state. */
async function pollReplaceRootTask(api: AwsApi, region: string, taskId: string, timeoutMs = 30 * 60_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  const delay = Math.max(1, api.config.pollSeconds ?? 15) * 1000;
  for (;;) {
    const out = await api.call(region, 'DescribeReplaceRootVolumeTasks', (c) =>
      c.send(new DescribeReplaceRootVolumeTasksCommand({ ReplaceRootVolumeTaskIds: [taskId] })),
    );
    const state = out.ReplaceRootVolumeTasks?.[0]?.TaskState;
    if (state === 'succeeded' || state === 'failed' || state === 'failed-detached') return state;
    if (Date.now() > deadline) return `still ${state ?? 'unknown'} after ${Math.round(timeoutMs / 60000)} min`;
    await sleep(delay);
  }
}

async function disposeReplaced(api: AwsApi, region: string, volumeId: string, opts: RestoreDisksOptions, result: RestoreDisksResult): Promise<void> {
  if (opts.deleteReplaced) {
    await api.call(region, 'DeleteVolume', (c) => c.send(new DeleteVolumeCommand({ VolumeId: volumeId })));
    result.notes.push(`deleted replaced volume ${volumeId}`);
  } else {
    await api.call(region, 'CreateTags', (c) =>
      c.send(new CreateTagsCommand({ Resources: [volumeId], Tags: toTags({ [TAG_KEYS.tool]: TOOL_TAG_VALUE, [AWS_TAGS.replacedBy]: opts.runId }) })),
    );
    result.notes.push(`kept replaced volume ${volumeId} (tagged ${AWS_TAGS.replacedBy}=${opts.runId})`);
  }
}
