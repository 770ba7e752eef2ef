/**
 * Per-address merge of an IPAMBlock the cluster re-created after the backup, and restore's judgement of IPAM
 * objects once written.
 *
 * libcalico-go seeds a node's first block from a hash of its hostname: when the IPAM objects were lost and Calico
 * allocated again (calico-node's tunnel allocator, a new pod), the node re-claims the *same* block CIDR, empty but
 * for what it just allocated. Keeping that block "as the cluster has it" frees the address of every pod that still
 * runs from it (the next pods get them again: duplicate IPs). So a re-created block gets the bundle's allocations
 * back address by address: an ordinal that is free now is allocated again to the bundle's handle with the bundle's
 * attributes; an ordinal another handle holds now is a duplicate IP (two owners, one address), reported with the
 * pod to restart, never overwritten.
 */
import { IPAM_POD_HANDLE_PREFIX, IPAM_TUNNEL_HANDLE } from '../calico/knowledge.js';
import { addressAt, parseCidr } from '../doctor/ip.js';
import type { KubeObject } from '../kube/types.js';
import { canonicalJson } from '../util/canonical.js';
import type { AllocationAttr } from './ipam-use.js';

/** A bundle allocation whose address another handle holds now. */
export interface DuplicateIp {
  address: string;
  ordinal: number;
  /** The bundle's handle and the pod its attributes name (`namespace/pod`), if any. */
  bundleHandle: string;
  bundlePod?: string;
  /** The handle that holds the address in the cluster now, and its pod. */
  liveHandle: string;
  livePod?: string;
}

export interface BlockMerge {
  /** The live block with the bundle's allocations put back where their ordinal was free. */
  block: KubeObject;
  /** Ordinals allocated again to the bundle's handle. */
  restored: number[];
  /** Ordinals held by the bundle's handle in both (nothing to do). */
  held: number[];
  duplicates: DuplicateIp[];
  /** Ordinals free in the live block whose bundle allocation nothing uses now (ipam-use.ts): not put back. */
  unused: number[];
}

type Attr = AllocationAttr;

/** Whether to put back the bundle's allocation `attr` of `address` (ipam-use.ts AddressUse.keep). */
export type KeepAllocation = (attr: AllocationAttr, address: string) => boolean;

/**
 * A libcalico-go block's sequenceNumber starts at its creation time in nanoseconds (ipam_block.go newBlock) and
 * grows by one per write: no block is written a billion times, so a jump of a second or more means the live
 * block is another block than the bundle's, created later.
 */
const SEQUENCE_JUMP = 1_000_000_000n;

/**
 * Whether the live block was created after the bundle's copy was taken (the IPAM objects were lost, then Calico
 * claimed the same CIDR again): its sequenceNumber is newer than the bundle's by a re-creation, or (blocks written
 * before Calico had sequence numbers) it was created after the backup.
 */
export function blockRecreated(live: KubeObject, bundle: KubeObject, backupCreatedAt?: string): boolean {
  const seq = (o: KubeObject): bigint | undefined => {
    const v = o.spec?.sequenceNumber;
    return typeof v === 'number' || (typeof v === 'string' && /^\d+$/.test(v)) ? BigInt(v) : undefined;
  };
  const l = seq(live);
  const b = seq(bundle);
  if (l !== undefined && b !== undefined && l !== b) return l - b >= SEQUENCE_JUMP || l < b;
  const created = Date.parse(live.metadata.creationTimestamp ?? '');
  const backup = Date.parse(backupCreatedAt ?? '');
  return Number.isFinite(created) && Number.isFinite(backup) && created > backup;
}

/** Each allocated ordinal of a block with its attributes. */
function allocated(block: KubeObject): Map<number, Attr> {
  const attrs: Attr[] = block.spec?.attributes ?? [];
  const out = new Map<number, Attr>();
  ((block.spec?.allocations ?? []) as (number | null)[]).forEach((a, ordinal) => {
    if (a !== null && a !== undefined) out.set(ordinal, attrs[a] ?? {});
  });
  return out;
}

/** The bundle block's attributes of the allocation at `ordinal` ({} when none). */
export function attributeAt(block: KubeObject, ordinal: number): Attr {
  const i = (block.spec?.allocations ?? [])[ordinal];
  return (i === null || i === undefined ? undefined : block.spec?.attributes?.[i]) ?? {};
}

const podOf = (a: Attr): string | undefined => (a.secondary?.pod ? `${a.secondary.namespace ?? ''}/${a.secondary.pod}` : undefined);

/**
 * Puts the bundle block's allocations (those at `only` ordinals, or all) into the live block where their ordinal
 * is free and `keep` (when given) says the address is used now. The live block is not changed; the merged copy is
 * returned with what was done.
 */
export function mergeBlock(live: KubeObject, bundle: KubeObject, only?: readonly number[], keep?: KeepAllocation): BlockMerge {
  const block = structuredClone(live);
  const spec = (block.spec ??= {});
  const size = (spec.allocations ?? []).length || (bundle.spec?.allocations ?? []).length;
  const allocations: (number | null)[] = (spec.allocations ??= Array(size).fill(null));
  const attributes: Attr[] = (spec.attributes ??= []);
  const cidr = parseCidr(spec.cidr ?? bundle.spec?.cidr);
  const liveNow = allocated(live);
  const wanted = allocated(bundle);
  const out: BlockMerge = { block, restored: [], held: [], duplicates: [], unused: [] };
  for (const [ordinal, attr] of wanted) {
    if (only && !only.includes(ordinal)) continue;
    const now = liveNow.get(ordinal);
    if (now?.handle_id === attr.handle_id) {
      out.held.push(ordinal);
      continue;
    }
    if (now) {
      out.duplicates.push({
        address: cidr ? addressAt(cidr, ordinal) : `ordinal ${ordinal}`,
        ordinal,
        bundleHandle: attr.handle_id ?? '(no handle)',
        ...(podOf(attr) ? { bundlePod: podOf(attr) } : {}),
        liveHandle: now.handle_id ?? '(no handle)',
        ...(podOf(now) ? { livePod: podOf(now) } : {}),
      });
      continue;
    }
    if (keep && !keep(attr, cidr ? addressAt(cidr, ordinal) : '')) {
      out.unused.push(ordinal);
      continue;
    }
    // The same attributes (one pod's addresses, several ordinals) share one entry, as libcalico-go writes them.
    let index = attributes.findIndex((a) => canonicalJson(a) === canonicalJson(attr));
    if (index < 0) index = attributes.push(structuredClone(attr)) - 1;
    allocations[ordinal] = index;
    out.restored.push(ordinal);
  }
  if (out.restored.length) {
    const taken = new Set(out.restored);
    spec.unallocated = ((spec.unallocated ?? []) as number[]).filter((o) => !taken.has(o));
    const seqs = bundle.spec?.sequenceNumberForAllocation;
    if (seqs && typeof seqs === 'object') {
      spec.sequenceNumberForAllocation ??= {};
      for (const o of out.restored) if (seqs[String(o)] !== undefined) spec.sequenceNumberForAllocation[String(o)] = seqs[String(o)];
    }
  }
  return out;
}

/**
 * The bundle's block as restore creates it when the cluster lacks it: without the allocations `keep` says nothing
 * uses now (their ordinals free again, their attributes dropped when no allocation refers to them any more, as
 * libcalico-go's release leaves a block). Returns the block (the same object when nothing is left out) and the
 * ordinals left out.
 */
export function withoutUnused(bundle: KubeObject, keep: KeepAllocation): { block: KubeObject; unused: number[] } {
  const cidr = parseCidr(bundle.spec?.cidr);
  const unused: number[] = [];
  for (const [ordinal, attr] of allocated(bundle)) if (!keep(attr, cidr ? addressAt(cidr, ordinal) : '')) unused.push(ordinal);
  if (!unused.length) return { block: bundle, unused };
  const block = structuredClone(bundle);
  const spec = block.spec!;
  const allocations: (number | null)[] = spec.allocations;
  for (const o of unused) allocations[o] = null;
  const attrs: Attr[] = spec.attributes ?? [];
  const renumber = new Map<number, number>();
  spec.attributes = [];
  allocations.forEach((a, o) => {
    if (a === null || a === undefined) return;
    if (!renumber.has(a)) renumber.set(a, spec.attributes.push(attrs[a] ?? {}) - 1);
    allocations[o] = renumber.get(a)!;
  });
  spec.unallocated = [...((spec.unallocated ?? []) as number[]), ...unused];
  if (spec.sequenceNumberForAllocation && typeof spec.sequenceNumberForAllocation === 'object')
    for (const o of unused) delete spec.sequenceNumberForAllocation[String(o)];
  return { block, unused };
}

/**
 * Whether a duplicate's bundle pod is gone, so that its address was released with it and the pod holding it now is
 * its rightful user (the operator's teardown deletes its own pods; a reinstall starts new ones that take the
 * re-claimed blocks' lowest addresses). `container`: the CNI containerID of the pod of that namespace and name now
 * (undefined: no such pod; '': it has none recorded). A pod of that name in another sandbox (a StatefulSet pod
 * started again) is another pod. A duplicate whose bundle allocation names no pod (a tunnel address) is never gone.
 */
export function releasedWithPod(d: DuplicateIp, container: string | undefined): boolean {
  if (!d.bundlePod) return false;
  if (container === undefined) return true;
  return !!container && d.bundleHandle.startsWith(IPAM_POD_HANDLE_PREFIX) && d.bundleHandle !== `${IPAM_POD_HANDLE_PREFIX}${container}`;
}

/**
 * Time for a CNI ADD in flight to finish or release what it took. The CNI plugin assigns an address before it sets
 * up the pod's routes and releases it when that fails, as it does for an address a running pod still uses on its
 * node (node-side-night.test.ts: a calico-apiserver pod's failed ADD held a bundle pod's address for 0.6 s), and the
 * kubelet retries that ADD every few seconds with the same container ID.
 */
export const DUPLICATE_SETTLE_MS = 3000;

/**
 * The duplicates of a block read now that an earlier read of it (one settle before) already had: the same handle at
 * the same ordinal. Only those are duplicates; the others are an ADD in flight. A retried ADD keeps its handle but
 * takes the next free ordinal (libcalico-go puts a released ordinal at the end of `unallocated`), so it is never
 * seen twice at one address, while a pod that keeps the address is.
 */
export function settledDuplicates(now: readonly DuplicateIp[], earlier: readonly DuplicateIp[]): DuplicateIp[] {
  return now.filter((d) => earlier.some((e) => e.ordinal === d.ordinal && e.liveHandle === d.liveHandle));
}

/** One line per duplicate: the address, who holds it now, and the pod to restart. */
export function duplicateLine(d: DuplicateIp): string {
  const restart = d.bundlePod ? `restart pod ${d.bundlePod} if it still runs` : `find what uses ${d.address} under handle ${d.bundleHandle} and restart it`;
  return `duplicate IP ${d.address}: the bundle allocates it to handle ${d.bundleHandle}${d.bundlePod ? ` (pod ${d.bundlePod})` : ''}, the cluster now to handle ${d.liveHandle}${d.livePod ? ` (pod ${d.livePod})` : ''}; ${restart} so it gets an address IPAM knows`;
}

/**
 * Restore's read-back of an IPAM object: not byte equality (calico-node's tunnel allocator, the CNI plugin and
 * kube-controllers keep writing IPAM after the restore, which is their normal work) but whether what the restore
 * put back is still there: every bundle allocation (those at `ordinals`, or all) still held by its handle; a handle
 * or an affinity still there for its node and block. Returns the paths that are not.
 */
export function ipamDrift(desired: KubeObject, live: KubeObject | undefined, ordinals?: readonly number[]): string[] {
  // A tunnel handle the allocator released (and may be re-creating for the node's new address) is its normal work.
  if (!live) return desired.kind === 'IPAMHandle' && IPAM_TUNNEL_HANDLE.test(desired.spec?.handleID ?? desired.metadata.name) ? [] : ['(object is gone)'];
  if (desired.kind === 'IPAMBlock') {
    const now = allocated(live);
    const cidr = parseCidr(desired.spec?.cidr);
    const lost: string[] = [];
    for (const [ordinal, attr] of allocated(desired)) {
      if (ordinals && !ordinals.includes(ordinal)) continue;
      // A node's tunnel allocator releases a tunnel address of the bundle that its node no longer uses (it moved on
      // after the loss): its normal work, not a loss.
      if (IPAM_TUNNEL_HANDLE.test(attr.handle_id ?? '')) continue;
      if (now.get(ordinal)?.handle_id !== attr.handle_id)
        lost.push(`spec.allocations[${ordinal}] (${cidr ? addressAt(cidr, ordinal) : ordinal}, handle ${attr.handle_id ?? '?'})`);
    }
    return lost;
  }
  if (desired.kind === 'BlockAffinity') {
    const paths = [];
    if (live.spec?.node !== desired.spec?.node) paths.push('spec.node');
    if (live.spec?.cidr !== desired.spec?.cidr) paths.push('spec.cidr');
    return paths;
  }
  return [];
}
