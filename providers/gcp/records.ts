/**
 * The pure parts of the GCP provider: a node to its instance (providerID, mapping entry, default project), the
 * labels a snapshot gets, the `snapshots.list` filter for a SnapshotFilter, and a listed snapshot back to a record.
 */
import {
  BadInputError,
  type NodeInfo,
  type NodeMappingEntry,
  type NodeTarget,
  parseProviderId,
  type SnapshotFilter,
  type SnapshotRecord,
  type SnapshotTags,
  TOOL_TAG_VALUE,
} from '../../src/provider-kit/index.js';
import { GCP_LABELS, labelValue, lastPath } from './util.js';

/** The project when neither the node nor its mapping entry names one: config, then the gcloud environment. */
export function defaultGcpProject(configured: string | undefined, env: NodeJS.ProcessEnv = process.env): string | undefined {
  return configured ?? env.GOOGLE_CLOUD_PROJECT ?? env.CLOUDSDK_CORE_PROJECT;
}

/** The mapping entry wins over the providerID (`gce://P/Z/I`); undefined when no instance is known. */
export function resolveGcpTarget(node: NodeInfo, mapping: NodeMappingEntry | undefined, defaultProject: string | undefined): NodeTarget | undefined {
  const id = parseProviderId(node.providerID);
  const m = (k: string) => (typeof mapping?.[k] === 'string' ? (mapping[k] as string) : undefined);
  const project = m('project') ?? (id.provider === 'gcp' ? id.project : undefined) ?? defaultProject;
  const zone = m('zone') ?? (id.provider === 'gcp' ? id.zone : undefined);
  const instance = m('instance') ?? (id.provider === 'gcp' ? id.instance : undefined);
  if (!instance) return undefined;
  if (!project || !zone) throw new BadInputError(`node ${node.name}: GCP project and zone unknown (set them in the mapping file)`);
  return { node: node.name, provider: 'gcp', machine: instance, location: { project, zone } };
}

/** GCE labels of one disk's snapshot: the shared tags plus machine, device and boot, so `list` can rebuild the record. */
export function snapshotLabels(
  target: NodeTarget,
  tags: SnapshotTags,
  device: string | null | undefined,
  boot: boolean | null | undefined,
): Record<string, string> {
  return {
    [GCP_LABELS.tool]: labelValue(TOOL_TAG_VALUE),
    [GCP_LABELS.bundle]: labelValue(tags.bundleId),
    [GCP_LABELS.cluster]: labelValue(tags.clusterId),
    [GCP_LABELS.node]: labelValue(tags.node),
    [GCP_LABELS.machine]: labelValue(target.machine),
    [GCP_LABELS.device]: labelValue(device ?? ''),
    [GCP_LABELS.boot]: String(!!boot),
  };
}

/** The labels a listed snapshot must carry, and the same as a `snapshots.list` filter expression. */
export function listQuery(filter: SnapshotFilter): { want: Record<string, string>; expr: string } {
  const want: Record<string, string> = { [GCP_LABELS.tool]: labelValue(TOOL_TAG_VALUE) };
  if (filter.bundleId) want[GCP_LABELS.bundle] = labelValue(filter.bundleId);
  if (filter.clusterId) want[GCP_LABELS.cluster] = labelValue(filter.clusterId);
  const expr = Object.entries(want)
    .map(([k, v]) => `(labels.${k} = "${v}")`)
    .join(' AND ');
  return { want, expr };
}

/** The fields of a GCE Snapshot the provider reads. */
export interface ListedGcpSnapshot {
  name?: string | null;
  labels?: Record<string, string> | null;
  creationTimestamp?: string | null;
  status?: string | null;
  sourceDisk?: string | null;
  diskSizeGb?: unknown;
}

/**
 * A listed snapshot as a record, or undefined when it is not one of ours after all (the filter syntax is
 * server-side best effort, the labels are the truth) or not older than `createdBefore`.
 */
export function recordFromSnapshot(s: ListedGcpSnapshot, project: string, filter: SnapshotFilter, want: Record<string, string>): SnapshotRecord | undefined {
  const l = (s.labels ?? {}) as Record<string, string>;
  if (Object.entries(want).some(([k, v]) => l[k] !== v)) return undefined;
  const created = s.creationTimestamp ? new Date(s.creationTimestamp) : new Date(0);
  if (filter.createdBefore && created >= filter.createdBefore) return undefined;
  const status = String(s.status);
  return {
    provider: 'gcp',
    node: l[GCP_LABELS.node] ?? '',
    machine: l[GCP_LABELS.machine] ?? '',
    disk: lastPath(s.sourceDisk),
    device: l[GCP_LABELS.device] ?? '',
    boot: l[GCP_LABELS.boot] === 'true',
    snapshotId: s.name!,
    sizeGiB: Number(s.diskSizeGb ?? 0) || undefined,
    state: status === 'READY' ? 'completed' : status === 'FAILED' ? 'failed' : 'pending',
    created: created.toISOString(),
    location: { project },
    details: { bundleId: l[GCP_LABELS.bundle], clusterId: l[GCP_LABELS.cluster] },
  };
}
