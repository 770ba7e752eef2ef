/**
 * Removes what the API server owns from an object, so a bundle copy and the live object compare equal
 * when nothing a user or controller chose has changed, and so an object can be re-created elsewhere.
 */
import type { KubeObject } from './types.js';

/** metadata fields the server sets; never part of what a restore writes or a diff compares. */
export const SERVER_METADATA_FIELDS = [
  'uid',
  'resourceVersion',
  'creationTimestamp',
  'managedFields',
  'generation',
  'selfLink',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
] as const;

/**
 * Kinds whose `status` is state worth keeping (restored and compared). For every other kind status is
 * observed runtime state (TigeraStatus, Installation status, CalicoNodeStatus, CRD conditions) and is dropped.
 */
export const STATUS_RELEVANT_KINDS: readonly string[] = [];

export interface StripOptions {
  /** Also drop `ownerReferences[].uid` (uids differ after a restore; used by diff). */
  ownerUids?: boolean;
  /** Keep `status` even for kinds where it is runtime state. */
  keepStatus?: boolean;
  /** Also drop the server fields inside Calico's v3 metadata annotation (for comparing, never for writing). */
  v3MetadataServerFields?: boolean;
}

/**
 * The annotation where libcalico-go keeps an object's projectcalico.org/v3 metadata on its crd.projectcalico.org
 * copy. Calico up to 3.27.4 stores the object's own uid in it too, and its kube-controllers rewrites it after a
 * re-create (KubeControllersConfiguration default after a restore): server data, compared like the top-level uid.
 */
const CALICO_V3_METADATA_ANNOTATION = 'projectcalico.org/metadata';

function withoutV3ServerFields(raw: string): string {
  try {
    const meta = JSON.parse(raw) as Record<string, unknown>;
    if (!meta || typeof meta !== 'object') return raw;
    for (const f of SERVER_METADATA_FIELDS) delete meta[f];
    return JSON.stringify(meta);
  } catch {
    return raw;
  }
}

/** A deep copy of `obj` without server-owned fields. The input is not modified. */
export function stripServerFields<T extends KubeObject>(obj: T, opts: StripOptions = {}): T {
  const out = structuredClone(obj) as T;
  const md: Record<string, unknown> = (out.metadata ?? {}) as any;
  for (const f of SERVER_METADATA_FIELDS) delete md[f];
  if (md.annotations && Object.keys(md.annotations).length === 0) delete md.annotations;
  if (md.labels && Object.keys(md.labels).length === 0) delete md.labels;
  const annotations = md.annotations as Record<string, string> | undefined;
  if (opts.v3MetadataServerFields && annotations?.[CALICO_V3_METADATA_ANNOTATION] !== undefined)
    annotations[CALICO_V3_METADATA_ANNOTATION] = withoutV3ServerFields(annotations[CALICO_V3_METADATA_ANNOTATION]);
  if (opts.ownerUids && Array.isArray(md.ownerReferences)) {
    md.ownerReferences = (md.ownerReferences as any[]).map(({ uid: _uid, ...rest }) => rest);
  }
  if (!opts.keepStatus && !STATUS_RELEVANT_KINDS.includes(out.kind)) delete (out as any).status;
  return out;
}
