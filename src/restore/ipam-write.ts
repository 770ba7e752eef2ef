/**
 * Writing IPAM objects. Calico's allocators (calico-node's tunnel allocator, the CNI plugin) keep writing IPAM
 * while restore does, whatever the datastore lock says, so the bundle's copy is never PUT over a live object:
 * - an IPAMBlock that exists (re-created, or created between planning and writing: the create met 409) gets the
 *   bundle's allocations merged into it as it is at that moment, retried on a write conflict;
 * - an IPAMHandle that exists (the create met 409, or the plan found it counting less than the restore puts back) gets,
 *   per block, the count of addresses that block allocates to it now;
 * - a BlockAffinity that exists is left as it is (whoever created it holds the block).
 */
import { POD_ANNOTATION_CONTAINER_ID } from '../calico/knowledge.js';
import { K } from '../kube/builtin.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import { DUPLICATE_SETTLE_MS, duplicateLine, mergeBlock, releasedWithPod, settledDuplicates, type DuplicateIp } from './ipam-merge.js';
import { allocatesTo } from './ipam.js';
import type { RestoreAction } from './types.js';

/** Tries of a merge that meets a write conflict (someone wrote the block between our read and our write). */
const MERGE_TRIES = 8;
/** Readings of a block a settle apart while a duplicate may be an ADD in flight (each try of it takes another ordinal). */
const SETTLES = 3;

export async function writeIpam(
  client: KubeClient,
  type: ResourceType,
  action: RestoreAction,
  body: KubeObject,
  settleMs = DUPLICATE_SETTLE_MS,
): Promise<KubeObject> {
  if (action.action === 'create') {
    if (body.kind === 'IPAMHandle' && action.ipam?.recheck?.length && !(await stillAllocated(client, type, action.ipam.recheck, body))) {
      // Its address went to another handle between planning and writing (the merge of its block found it taken):
      // created, it would be a handle without addresses, which nothing releases.
      action.action = 'skip';
      action.reason = `not created: block ${action.ipam.recheck.join(', ')} no longer allocates an address to it (taken by another handle between planning and writing; its block says who)`;
      return body;
    }
    try {
      return await client.create(type, body, { fieldValidation: 'Strict' });
    } catch (err) {
      if (!(err instanceof KubeApiError && err.conflict)) throw err;
    }
  } else if (action.action !== 'update' || !(body.kind === 'IPAMHandle' || (body.kind === 'IPAMBlock' && action.ipam?.ordinals))) {
    throw new Error(`${action.id}: IPAM objects are only created or merged, never ${action.action === 'update' ? 'updated' : action.action}`);
  }
  if (body.kind === 'IPAMBlock') return mergeInto(client, type, action, body, settleMs);
  const live = await client.get(type, body.metadata.namespace, body.metadata.name);
  if (body.kind === 'IPAMHandle') return countHandle(client, type, live);
  return live;
}

/**
 * The bundle's allocations at the planned ordinals merged into the block as it is now. A duplicate seen for the first
 * time may be a CNI ADD in flight (ipam-merge.ts DUPLICATE_SETTLE_MS): what is free is written, and the block is read
 * again a settle later; only what the same handle still holds at the same ordinal is a duplicate, what was freed
 * meanwhile is put back (up to SETTLES readings).
 */
async function mergeInto(client: KubeClient, type: ResourceType, action: RestoreAction, bundle: KubeObject, settleMs: number): Promise<KubeObject> {
  const planned = action.ipam?.ordinals;
  let earlier: DuplicateIp[] = [];
  let settles = 0;
  for (let conflicts = 0; ;) {
    const live = await client.get(type, bundle.metadata.namespace, bundle.metadata.name);
    const m = mergeBlock(live, bundle, planned);
    // An address taken since the plan (it was free then) by the successor of a bundle pod that is gone is no duplicate.
    const duplicates: DuplicateIp[] = [];
    for (const d of m.duplicates) if (!releasedWithPod(d, await podContainer(client, d.bundlePod))) duplicates.push(d);
    const settling = settledDuplicates(duplicates, earlier).length < duplicates.length && settles < SETTLES;
    if (duplicates.length && !settling) {
      const lines = new Set([...(action.ipam?.duplicates ?? []), ...duplicates.map(duplicateLine)]);
      action.ipam = { ...action.ipam, duplicates: [...lines] };
    }
    // The read-back judges what this write put back or found held, not what another handle holds now.
    action.ipam = { ...action.ipam, ordinals: [...m.restored, ...m.held].sort((a, b) => a - b) };
    let written = live;
    if (m.restored.length) {
      try {
        written = await client.replace(
          type,
          { ...m.block, metadata: { ...m.block.metadata, resourceVersion: live.metadata.resourceVersion } },
          { fieldValidation: 'Strict' },
        );
      } catch (err) {
        if (!(err instanceof KubeApiError && err.conflict) || ++conflicts >= MERGE_TRIES) throw err;
        continue;
      }
    }
    if (!settling) return written;
    earlier = duplicates;
    settles++;
    await new Promise((r) => setTimeout(r, settleMs));
  }
}

/** Whether one of the blocks named (by their object names) allocates an address to the handle `body` now. */
async function stillAllocated(client: KubeClient, handleType: ResourceType, blocks: string[], body: KubeObject): Promise<boolean> {
  const handle: string = body.spec?.handleID ?? body.metadata.name;
  for (const name of blocks) if (allocatesTo(await client.getOrUndefined(blockTypeOf(handleType), undefined, name), handle)) return true;
  return false;
}

/** The IPAMBlock resource of the same API group and version as the IPAMHandle one. */
const blockTypeOf = (handleType: ResourceType): ResourceType => ({ ...handleType, plural: 'ipamblocks', kind: 'IPAMBlock' });

/** The CNI containerID of pod `namespace/name` now: undefined when there is no such pod, '' when it has none recorded. */
async function podContainer(client: KubeClient, pod: string | undefined): Promise<string | undefined> {
  if (!pod) return undefined;
  const [namespace, name] = pod.split('/');
  const live = await client.getOrUndefined(K.pod, namespace, name!);
  return live ? (live.metadata.annotations?.[POD_ANNOTATION_CONTAINER_ID] ?? '') : undefined;
}

/** A live handle's count per block raised to what the block allocates to it now (blocks merged before handles). */
async function countHandle(client: KubeClient, handleType: ResourceType, live: KubeObject): Promise<KubeObject> {
  const handle: string = live.spec?.handleID ?? live.metadata.name;
  const blocks: KubeObject[] = await client.listAll(blockTypeOf(handleType));
  const counts: Record<string, number> = { ...(live.spec?.block ?? {}) };
  let changed = false;
  for (const b of blocks) {
    const attrs: { handle_id?: string }[] = b.spec?.attributes ?? [];
    const n = ((b.spec?.allocations ?? []) as (number | null)[]).filter((a) => a !== null && a !== undefined && attrs[a]?.handle_id === handle).length;
    if (n > (counts[b.spec?.cidr] ?? 0)) {
      counts[b.spec.cidr] = n;
      changed = true;
    }
  }
  if (!changed) return live;
  return client.replace(handleType, { ...live, spec: { ...live.spec, block: counts } }, { fieldValidation: 'Strict' });
}
