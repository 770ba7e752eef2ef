/**
 * IPAM objects are live state, not configuration. Every pod created or deleted since the backup changed an
 * IPAMBlock (its allocations), an IPAMHandle (created or deleted) and maybe a BlockAffinity; the bundle's copy is
 * an old picture of them. Writing it back frees every address allocated since the backup while its pod still
 * uses it (the next pod gets it again: duplicate pod IPs) and brings back allocations of pods that are gone.
 *
 * So restore merges instead of overwriting:
 * - an IPAM object that exists in the cluster is never written, whatever `--existing` says (skip, with why),
 *   but for an IPAMBlock Calico re-created after the backup (the IPAM objects were lost and a node re-claimed the
 *   same CIDR): that one gets the bundle's allocations back address by address (ipam-merge.ts), and a bundle
 *   allocation whose address another handle holds now is a duplicate IP, reported, unless its pod is gone (then
 *   the address was released with it and its new holder is its rightful user);
 * - an IPAMBlock the cluster lacks is created: no live allocation can be in its CIDR, so it cannot double-book;
 *   it is created without the allocations nothing uses now (ipam-use.ts: no running pod has the address, the node
 *   names another tunnel address), which would be leaks;
 * - in both cases, a re-created block's merge and a created block, a bundle allocation whose address no pod or
 *   node tunnel uses now is left out (ipam-use.ts): its pod is gone, or calico-node's allocator gave the node
 *   another address; putting it back would leak it (a tunnel handle would hold two addresses);
 * - an IPAMHandle the cluster lacks is created when the block it names, as it will be after the restore (the live
 *   one, or the bundle's when that is created), still allocates an address to it, or when that block is as the
 *   bundle has it (nothing was released from it since the backup, so the handle was lost, not released);
 *   otherwise its pod was deleted since the backup and the handle would be a handle without addresses;
 * - a BlockAffinity the cluster lacks is created only with its block, or when the live block is affine to the
 *   same node (or, 3.30+ LoadBalancer IPAM, `virtual:load-balancer` for an affinity of type virtual).
 * `--prune` never deletes IPAM objects: those the bundle lacks were allocated since the backup.
 */
import { CALICO_CRD_GROUP, IPAM_HOST_AFFINITY_PREFIX, IPAM_LIVE_KINDS, POD_ANNOTATION_CONTAINER_ID } from '../calico/knowledge.js';
import { groupOf, type KubeObject } from '../kube/types.js';
import { canonicalJson } from '../util/canonical.js';
import {
  attributeAt,
  blockRecreated,
  DUPLICATE_SETTLE_MS,
  duplicateLine,
  mergeBlock,
  releasedWithPod,
  settledDuplicates,
  withoutUnused,
  type BlockMerge,
  type DuplicateIp,
  type KeepAllocation,
} from './ipam-merge.js';
import type { AddressUse } from './ipam-use.js';
import { DesiredSpool, type SpoolSlot } from './spool.js';

export const isIpamLive = (o: Pick<KubeObject, 'apiVersion' | 'kind'>): boolean => IPAM_LIVE_KINDS.has(o.kind) && groupOf(o.apiVersion) === CALICO_CRD_GROUP;

/** The part of a planned restore action this module reads and changes. */
export interface IpamPlanned {
  action: {
    action: string;
    reason?: string;
    fix?: string;
    ipam?: { ordinals?: number[]; duplicates?: string[]; recheck?: string[] };
    /** The object's apiVersion and kind (a plan entry's ref): when given, what is not IPAM is never parsed. */
    ref?: Pick<KubeObject, 'apiVersion' | 'kind'>;
  };
  desired?: KubeObject;
  live?: KubeObject;
}

const SKIP_FIX = "nothing to do: the cluster's IPAM is the truth for allocations; to find leaks or missing allocations run calicoctl ipam check";

/** Reads the merge needs beyond the plan, done only when a handle or affinity's block is not in the plan. */
export interface IpamSources {
  /** The cluster's IPAMBlocks (a stream, or all at once). */
  liveBlocks(): Promise<KubeObject[]> | AsyncIterable<KubeObject>;
  /** The bundle's IPAMBlocks (when the plan has none of them, as with `--kinds IPAMHandle`). */
  bundleBlocks(): Promise<KubeObject[]> | AsyncIterable<KubeObject>;
  /** When the bundle was made (manifest createdAt): a live block created later is a re-created one. */
  backupCreatedAt?: string;
  /**
   * The cluster's pods, read only when a re-created block meets a duplicate: a bundle allocation whose pod is gone
   * was released with it, so the address its successor holds now is no duplicate. Without it every one is reported.
   */
  livePods?(): Promise<KubeObject[]>;
  /**
   * Which addresses pods and node tunnels use now (ipam-use.ts), read once when a block is first created or merged:
   * a bundle allocation nothing uses is not put back. Without it every allocation is put back.
   */
  addressUse?(): Promise<AddressUse>;
  /**
   * The live block read again. A duplicate seen while planning is judged once more a moment later: the CNI plugin
   * assigns an address before it sets up the pod's routes and releases it when that fails, as it does for an address
   * a running pod still uses on its node, so the holder seen may be gone a second later (node-side-night.test.ts: a
   * calico-apiserver pod's ADD held a bundle pod's address for 0.6 s; restore judged it a duplicate and left the
   * bundle pod without its allocation). The kubelet retries that ADD with the same container ID, and each try takes
   * the next free ordinal: only what the same handle holds at the same ordinal in both readings is a duplicate; an
   * ordinal held by another handle in the second reading only is planned for the write, which puts it back once free.
   * Without it the first reading stands.
   */
  rereadBlock?(live: KubeObject): Promise<KubeObject | undefined>;
  /** How long after the first duplicate seen the blocks are read again (default DUPLICATE_SETTLE_MS). */
  settleMs?: number;
}

/**
 * The plan's entries for the merge, visited one at a time: a restore of 100k handles never holds them all as objects
 * (plan-table.ts builds each when visited and keeps what the visit changed). An array is visited as it is.
 */
export interface IpamEntries {
  each(visit: (p: IpamPlanned) => Promise<void>): Promise<void>;
}

const eachOf = (planned: IpamPlanned[] | IpamEntries): IpamEntries =>
  Array.isArray(planned)
    ? {
        async each(visit) {
          for (const p of planned) await visit(p);
        },
      }
    : planned;

/** Turns the plan's writes of IPAM objects into the merge described above. */
export async function mergeIpamPlan(planned: IpamPlanned[] | IpamEntries, sources: IpamSources): Promise<number> {
  const entries = eachOf(planned);
  // The bundle's blocks by CIDR (from the plan, else read from the bundle), and the blocks as they will be after
  // the restore (live ones stay, missing ones come from the bundle; else read from the cluster). Both kept as text
  // in a spool of their own, a few parsed at a time (blockIndex): 100k handles' live blocks were 18 MB parsed.
  const spool = new DesiredSpool();
  try {
    const before = blockIndex(sources.bundleBlocks, spool);
    const after = blockIndex(sources.liveBlocks, spool);
    const created = new Set<string>(); // CIDRs of the blocks this restore creates
    // CIDR -> handles whose allocations the merge puts back into that live block (re-created by Calico after the
    // backup): the only handles whose address another allocator can take between planning and writing.
    const putBack = new Map<string, Set<string>>();
    const duplicated = new Map<string, string>(); // bundle handle -> address another handle holds now
    // CIDR -> handles whose address an ADD in flight held when planned: the write puts it back once free.
    const awaited = new Map<string, Set<string>>();
    const gone = podGone(sources);
    let settleAt: number | undefined;
    let use: Promise<KeepAllocation | undefined> | undefined;
    const keeper = () =>
      (use ??= sources.addressUse
        ? sources.addressUse().then(
            (u): KeepAllocation =>
              (attr, address) =>
                u.keep(attr, address),
          )
        : Promise.resolve(undefined));
    // `desired` may parse the object from the plan's JSON text on each read: each entry's kind is learnt once (from
    // its ref when it has one, parsing nothing), blocks are judged in this first visit, handles and affinities in the
    // second, each parsed where judged.
    const kinds: (string | undefined)[] = [];
    await entries.each(async (p) => {
      const head = p.action.ref ?? p.desired;
      const kind = head && isIpamLive(head) ? head.kind : undefined;
      kinds.push(kind);
      if (kind === 'IPAMBlock') await judgeBlock(p, head === p.action.ref ? p.desired! : (head as KubeObject));
    });
    let skipped = 0;
    const skip = (p: IpamPlanned, reason: string) => {
      p.action.action = 'skip';
      p.action.reason = reason;
      p.action.fix = SKIP_FIX;
      skipped++;
    };
    let k = 0;
    await entries.each(async (p) => {
      const kind = kinds[k++];
      if (kind) await judge(p, kind);
    });
    return skipped;

    /** A block of the plan: indexed, and merged address by address when Calico re-created it after the backup. */
    async function judgeBlock(p: IpamPlanned, bundled: KubeObject): Promise<void> {
      before.set(bundled);
      let o = bundled;
      if (!p.live && p.action.action === 'create') {
        created.add(o.spec?.cidr);
        const keep = await keeper();
        const w = keep ? withoutUnused(o, keep) : undefined;
        if (w?.unused.length) {
          o = p.desired = w.block;
          p.action.reason = `created without ${w.unused.length} allocation(s) of the bundle that nothing uses now (no running pod has the address, or the node names another tunnel address): putting them back would leak them`;
        }
      }
      const b = p.live ?? (p.action.action === 'create' ? o : undefined);
      if (b?.spec?.cidr) after.set(b);
      const a = p.action.action;
      if (!p.live || !(a === 'update' || a === 'replace' || a === 'skip')) return;
      if (!blockRecreated(p.live, o, sources.backupCreatedAt)) return;
      const keep = await keeper();
      // A bundle allocation whose pod is gone was released with it: its address's new holder is no duplicate.
      const judged = async (m: BlockMerge) => {
        const out: DuplicateIp[] = [];
        for (const d of m.duplicates) if (!(await gone(d))) out.push(d);
        return out;
      };
      let m = mergeBlock(p.live, o, undefined, keep);
      let duplicates = await judged(m);
      // Ordinals held by an ADD in flight when read again: the write puts them back once free (ipam-write.ts).
      let pending: DuplicateIp[] = [];
      if (duplicates.length && sources.rereadBlock) {
        // One wait for the whole plan: every block with a duplicate is read again once that moment has passed.
        settleAt ??= Date.now() + (sources.settleMs ?? DUPLICATE_SETTLE_MS);
        const wait = settleAt - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        const again = await sources.rereadBlock(p.live);
        if (again) {
          p.live = again;
          m = mergeBlock(again, o, undefined, keep);
          const seen = await judged(m);
          const kept = settledDuplicates(seen, duplicates);
          pending = seen.filter((d) => !kept.includes(d) && (!keep || keep(attributeAt(o, d.ordinal), d.address)));
          duplicates = kept;
        }
      }
      // The handles' judgement reads the blocks as the merge leaves them.
      after.set(m.block);
      for (const d of duplicates) duplicated.set(d.bundleHandle, d.address);
      if (duplicates.length) p.action.ipam = { duplicates: duplicates.map(duplicateLine) };
      if (!m.restored.length && !pending.length) return;
      const attrs: { handle_id?: string }[] = o.spec?.attributes ?? [];
      const handles = new Set<string>();
      for (const ordinal of m.restored) {
        const h = attrs[(o.spec?.allocations ?? [])[ordinal]]?.handle_id;
        if (h) handles.add(h);
      }
      for (const d of pending) handles.add(d.bundleHandle);
      putBack.set(o.spec?.cidr, handles);
      if (pending.length) awaited.set(o.spec?.cidr, new Set(pending.map((d) => d.bundleHandle)));
      p.action.action = 'update';
      p.action.ipam = { ...p.action.ipam, ordinals: [...m.restored, ...pending.map((d) => d.ordinal)].sort((a, b) => a - b) };
      const later = pending.length ? ` (${pending.length} of them held by a CNI ADD in flight when read: put back once it lets go)` : '';
      p.action.reason = `re-created by Calico after the backup: ${m.restored.length + pending.length} allocation(s) of the bundle put back address by address into the block as it is when written${later}`;
    }

    async function judge(p: IpamPlanned, kind: string): Promise<void> {
      const a = p.action.action;
      if (p.action.ipam?.ordinals) return;
      if (a === 'update' || a === 'replace' || (a === 'skip' && p.live)) {
        const short = kind === 'IPAMHandle' && p.live ? await undercounted(p.desired!, p.live, after) : [];
        if (short.length) {
          // The handle was re-created by Calico after the loss (a node's tunnel allocator) and counts only what it
          // allocated since; libcalico-go releases by handle through those counts, so it would never free the
          // allocations this restore puts back in other blocks (a leak nothing collects while the node exists).
          p.action.action = 'update';
          p.action.reason = `the cluster's handle does not count the allocations this restore puts back in block ${short.join(', ')}: its counts are raised`;
          return;
        }
        skip(p, "IPAM is live state: the cluster's object changed since the backup (addresses allocated or released) and is kept");
        return;
      }
      if (a !== 'create') return;
      if (kind === 'IPAMHandle') {
        const o = p.desired!;
        const handle: string = o.spec?.handleID ?? o.metadata.name;
        const blocks = Object.keys(o.spec?.block ?? {});
        let holds = false;
        // Live blocks the merge puts this handle's addresses back into: Calico's allocators keep writing them until
        // the write, which checks that one still allocates to it. (A block this restore creates, or a live one that
        // still has the allocation, needs no check: one GET per handle would double a large restore's requests.)
        const recheck: string[] = [];
        for (const cidr of blocks) {
          const now = await after.get(cidr);
          let here = allocatesTo(now, handle) || !!awaited.get(cidr)?.has(handle);
          if (!here && now) {
            const then = await before.get(cidr);
            here = !!then && canonicalJson(now.spec) === canonicalJson(then.spec);
          }
          if (!here) continue;
          holds = true;
          if (putBack.get(cidr)?.has(handle) && now?.metadata.name) recheck.push(now.metadata.name);
        }
        if (holds && recheck.length) p.action.ipam = { ...p.action.ipam, recheck };
        const taken = duplicated.get(handle);
        if (!holds && taken) skip(p, `its address ${taken} is held by another handle now (a duplicate IP, reported with its block)`);
        else if (!holds)
          skip(
            p,
            `released since the backup: no allocation in ${blocks.length ? `block ${blocks.join(', ')}` : 'any block'} carries this handle (its pod is gone)`,
          );
      } else if (kind === 'BlockAffinity') {
        const o = p.desired!;
        const block = await after.get(o.spec?.cidr);
        // 3.30+ LoadBalancer IPAM: type virtual, the block affine to `virtual:load-balancer`; otherwise `host:<node>`.
        const affine = o.spec?.type && o.spec.type !== 'host' ? `${o.spec.type}:${o.spec?.node}` : `${IPAM_HOST_AFFINITY_PREFIX}${o.spec?.node}`;
        if (!created.has(o.spec?.cidr) && block?.spec?.affinity !== affine) {
          skip(
            p,
            `block ${o.spec?.cidr} ${block ? `is affine to ${block.spec?.affinity ?? 'no node'} in the cluster` : 'no longer exists'}; the affinity was released since the backup`,
          );
        }
      }
    }
  } finally {
    spool.close();
  }
}

/** A duplicate's bundle pod is gone (releasedWithPod), judged from the cluster's pods, listed once when first needed. */
function podGone(sources: IpamSources): (d: DuplicateIp) => Promise<boolean> {
  // namespace/name -> the pod's CNI containerID ('' when it has none): only that is kept of each pod.
  let pods: Promise<Map<string, string>> | undefined;
  return async (d) => {
    if (!d.bundlePod || !sources.livePods) return false;
    pods ??= sources
      .livePods()
      .then(
        (all) => new Map(all.map((p) => [`${p.metadata.namespace ?? ''}/${p.metadata.name}`, p.metadata.annotations?.[POD_ANNOTATION_CONTAINER_ID] ?? ''])),
      );
    return releasedWithPod(d, (await pods).get(d.bundlePod));
  };
}

/** The bundle handle's blocks in which the blocks after the restore allocate more to it than the live handle counts. */
async function undercounted(bundle: KubeObject, live: KubeObject, after: ReturnType<typeof blockIndex>): Promise<string[]> {
  const handle: string = bundle.spec?.handleID ?? bundle.metadata.name;
  const out: string[] = [];
  for (const cidr of Object.keys(bundle.spec?.block ?? {})) {
    const b = await after.get(cidr);
    const attrs: { handle_id?: string }[] = b?.spec?.attributes ?? [];
    const n = ((b?.spec?.allocations ?? []) as (number | null)[]).filter((i) => i !== null && i !== undefined && attrs[i]?.handle_id === handle).length;
    if (n > (live.spec?.block?.[cidr] ?? 0)) out.push(cidr);
  }
  return out;
}

/** Parsed blocks kept at once by a block index: handles of one block mostly come one after another. */
const PARSED_BLOCKS = 64;

/**
 * IPAMBlocks by CIDR, as text in `spool`: those set first win; `read` fills in the rest, once, when a CIDR is not
 * known. The last PARSED_BLOCKS blocks asked for are kept parsed.
 */
function blockIndex(read: () => Promise<KubeObject[]> | AsyncIterable<KubeObject>, spool: DesiredSpool) {
  const byCidr = new Map<string, SpoolSlot>();
  const parsed = new Map<string, KubeObject>();
  let loaded = false;
  const put = (b: KubeObject) => {
    byCidr.set(b.spec?.cidr, spool.put(JSON.stringify(b)));
    parsed.delete(b.spec?.cidr);
  };
  return {
    set: put,
    async get(cidr: string): Promise<KubeObject | undefined> {
      if (!byCidr.has(cidr) && !loaded) {
        loaded = true;
        const r = read();
        for await (const b of Symbol.asyncIterator in r ? r : await r) if (!byCidr.has(b.spec?.cidr)) put(b);
      }
      const have = parsed.get(cidr);
      if (have) {
        // Most recently asked for last: the first one is the one to let go.
        parsed.delete(cidr);
        parsed.set(cidr, have);
        return have;
      }
      const slot = byCidr.get(cidr);
      if (!slot) return undefined;
      const b = JSON.parse(spool.get(slot)) as KubeObject;
      if (parsed.size >= PARSED_BLOCKS) parsed.delete(parsed.keys().next().value!);
      parsed.set(cidr, b);
      return b;
    },
  };
}

/** Whether an IPAMBlock has an address allocated to `handle`. */
export function allocatesTo(block: KubeObject | undefined, handle: string): boolean {
  if (!block) return false;
  const attrs: { handle_id?: string }[] = block.spec?.attributes ?? [];
  return ((block.spec?.allocations ?? []) as (number | null)[]).some((i) => i !== null && i !== undefined && attrs[i]?.handle_id === handle);
}
