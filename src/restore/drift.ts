/** Restore's drift check: what was written, read back after all writes and compared with what was sent. */
import { NODE_SELECTOR_STOP, isOperatorLabelled } from '../calico/knowledge.js';
import type { Reporter } from '../io/host.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import { canonicalJson } from '../util/canonical.js';
import { pool } from '../util/pool.js';
import type { ResourceResolver } from '../kube/resolver.js';
import { apiVersionOf, type KubeObject, type ResourceType } from '../kube/types.js';
import { isIpamLive } from './ipam.js';
import { ipamDrift } from './ipam-merge.js';
import { comparable, missingFrom } from './normalize.js';
import { CLUSTER_INFORMATION } from './order.js';

/** One written object (restore's planned entry). `drift` is set on its action when it changed. */
export interface DriftTarget {
  action: { id: string; drift?: string[]; ipam?: { ordinals?: number[] } };
  /** What the plan meant to write. */
  desired?: KubeObject;
  /** Its apiVersion, kind, namespace and name, when known without parsing `desired` (a plan entry's ref). */
  ref?: { apiVersion: string; kind: string; namespace?: string; name: string };
  /** What was actually sent (owner references re-linked), when it differs from desired. */
  written?: KubeObject;
  type?: ResourceType;
}

type Ref = { apiVersion: string; kind: string; namespace?: string; name: string };

/**
 * The written objects by number, for a restore that does not hold them all as objects (plan-table.ts): `ref` names
 * one without building it, `target` builds it where it is compared, and `compared` hears what the comparison set.
 */
export interface DriftSource {
  size: number;
  ref(k: number): Ref;
  target(k: number): DriftTarget;
  compared?(k: number, t: DriftTarget): void;
}

const arraySource = (targets: DriftTarget[]): DriftSource => ({
  size: targets.length,
  ref: (k) => targets[k]!.ref ?? refOfDesired(targets[k]!.desired!),
  target: (k) => targets[k]!,
});

/** From this many objects of one custom resource type on, they are read back with one paged list, not a GET each. */
const LIST_READBACK_MIN = 50;
/**
 * Objects per list request of the read-back: fewer requests, but each page is held parsed while it is compared.
 * Reading back 100,000 IPAM handles took 66 s with 500 per page and 48 s with 5000, whose pages took the restore's
 * memory from 230 to 393 MiB (273 MiB with 500); 1000 is between the two.
 */
const LIST_READBACK_PAGE = 1000;

/**
 * The drift check: each written object re-read after all writes and compared with what was sent (fields the
 * server added, like defaults, are fine). Custom resources written by the hundred (IPAM blocks, handles) are
 * read back with one paged list per type, LIST_READBACK_PAGE per request, instead of one GET each, which halved the requests
 * of a large restore; a few objects, and core objects (not worth listing every Secret of a cluster), one GET
 * each. A list whose continue token expires (410) falls back to GETs for what it had not reached.
 */
export async function findDrift(
  client: KubeClient,
  resolver: ResourceResolver,
  done: DriftTarget[] | DriftSource,
  concurrency: number,
  reporter: Reporter,
): Promise<{ id: string; paths: string[] }[]> {
  const src = Array.isArray(done) ? arraySource(done) : done;
  const drifted: { id: string; paths: string[] }[] = [];
  // `desired` may be re-parsed on each read (restore keeps it as text): read it once per use.
  const compare = (k: number, live: KubeObject | undefined) => {
    const p = src.target(k);
    const desired = p.desired!;
    const wanted = comparable(p.written ?? desired);
    if (desired.kind === CLUSTER_INFORMATION.kind) delete wanted.spec?.datastoreReady; // set by the lock release
    // IPAM is judged by what the restore put back still being held, not by bytes: Calico's allocators write on.
    const found = isIpamLive(desired) ? ipamDrift(desired, live, p.action.ipam?.ordinals) : live ? missingFrom(wanted, comparable(live)) : ['(object is gone)'];
    const stopped = live && found.some((path) => STOP_REWRITE_PATHS.has(path)) && stoppedByOperator(desired, live);
    const paths = live
      ? found.filter((path) => !(path === V3_METADATA_PATH && onlyOperatorMarked(desired, live)) && !(stopped && STOP_REWRITE_PATHS.has(path)))
      : found;
    if (paths.length) {
      p.action.drift = paths;
      drifted.push({ id: p.action.id, paths });
      reporter.warn('CNR_RESTORE_DRIFT', `${p.action.id} changed after it was written: ${paths.join(', ')}`);
    }
    src.compared?.(k, p);
  };
  // Grouped by type; within a type, an index a listed object's target is found in by the hash of its name (SortedRefs).
  // A Map per namespace of every name took megabytes at 100k objects (the read-back is the restore's peak); a target's
  // ref names it without parsing its object.
  const byType = new Map<string, { type: ResourceType; members: number[] }>();
  for (let k = 0; k < src.size; k++) {
    const head = src.ref(k);
    const type = (await resolver.forObject(head)) ?? src.target(k).type!;
    const tk = `${type.group}/${type.version}/${type.plural}`;
    let t = byType.get(tk);
    if (!t) byType.set(tk, (t = { type, members: [] }));
    t.members.push(k);
  }
  const one = async (type: ResourceType, k: number) => {
    const { namespace, name } = src.ref(k);
    compare(k, await client.getOrUndefined(type, namespace, name));
  };
  const singles: [ResourceType, number][] = [];
  for (const { type, members } of byType.values()) {
    if (!type.group || members.length < LIST_READBACK_MIN) {
      for (const k of members) singles.push([type, k]);
      continue;
    }
    const index = SortedRefs.of(members, (k) => src.ref(k), type.namespaced);
    try {
      for await (const page of client.listPages(type, { limit: LIST_READBACK_PAGE })) {
        for (const live of page.items) {
          const k = index.take(type.namespaced ? (live.metadata.namespace ?? '') : '', live.metadata.name);
          if (k !== undefined) compare(k, { ...live, apiVersion: live.apiVersion ?? apiVersionOf(type), kind: live.kind ?? type.kind });
        }
      }
      for (const k of index.left()) compare(k, undefined);
    } catch (err) {
      if (!(err instanceof KubeApiError && err.statusCode === 410)) throw err;
      for (const k of index.left()) singles.push([type, k]);
    }
  }
  await pool(singles, concurrency, ([type, k]) => one(type, k));
  return drifted;
}

const V3_METADATA = 'projectcalico.org/metadata';
const V3_METADATA_PATH = `metadata.annotations.${V3_METADATA}`;
const MANAGED_BY = 'app.kubernetes.io/managed-by';

/**
 * An IPPool whose v3 metadata changed only by the tigera operator's managed-by label: the resumed operator (v1.34+)
 * adopted a pool equal to its Installation entry and marked it as its own, which is what restore meant by writing
 * that entry (pools.ts); not drift.
 */
export function onlyOperatorMarked(desired: KubeObject, live: KubeObject): boolean {
  if (desired.kind !== 'IPPool') return false;
  const parse = (o: KubeObject) => {
    try {
      return JSON.parse(o.metadata.annotations?.[V3_METADATA] ?? '{}') as Record<string, any>;
    } catch {
      return undefined;
    }
  };
  const want = parse(desired);
  const got = parse(live);
  if (!want || !got || got.labels?.[MANAGED_BY] !== 'tigera-operator' || want.labels?.[MANAGED_BY] !== undefined) return false;
  const { [MANAGED_BY]: _marked, ...gotLabels } = got.labels ?? {};
  const rest = (m: Record<string, any>, labels: Record<string, unknown>) => canonicalJson({ ...m, labels: Object.keys(labels).length ? labels : undefined });
  return rest(want, want.labels ?? {}) === rest(got, gotLabels);
}

const STOP_REWRITE_PATHS = new Set(['spec.disabled', 'spec.nodeSelector']);

/**
 * A disabled IPPool that operator v1.34 (Calico 3.28) rewrote from the Installation entry restore stopped with
 * nodeSelector "!all()" (pools.ts): marked as its own, the stop as its selector and no `disabled`, which its pool type
 * lacks (NODE_SELECTOR_STOP), everything else as written. Still allocating on no node, and what restore meant by
 * stopping the entry; not drift. Any other change of the spec still is.
 */
export function stoppedByOperator(desired: KubeObject, live: KubeObject): boolean {
  if (desired.kind !== 'IPPool' || desired.spec?.disabled !== true || live.spec?.disabled === true) return false;
  if (live.spec?.nodeSelector !== NODE_SELECTOR_STOP || !isOperatorLabelled(live)) return false;
  const { disabled: _disabled, ...spec } = desired.spec;
  return missingFrom({ ...spec, nodeSelector: NODE_SELECTOR_STOP }, live.spec).length === 0;
}

/**
 * The targets of one type by a 32-bit hash of namespace and name, sorted: `take` finds a listed object's target once
 * (hash by binary search, then the target's own ref compared, so a collision costs a look, never a wrong match),
 * `left` is every target no listed object matched. 9 bytes a target, outside V8's heap: an index of name strings
 * kept 100,000 of them alive through the read-back, the restore's peak.
 */
class SortedRefs {
  private constructor(
    private readonly hashes: Int32Array,
    private readonly order: Int32Array,
    private readonly ref: (k: number) => Ref,
    private readonly namespaced: boolean,
    private readonly seen: Uint8Array,
  ) {}

  static of(members: number[], ref: (k: number) => Ref, namespaced: boolean): SortedRefs {
    const hashOf = members.map((k) => {
      const r = ref(k);
      return refHash(namespaced ? (r.namespace ?? '') : '', r.name);
    });
    const at = Int32Array.from(members.keys()).sort((a, b) => hashOf[a]! - hashOf[b]!);
    return new SortedRefs(
      Int32Array.from(at, (i) => hashOf[i]!),
      Int32Array.from(at, (i) => members[i]!),
      ref,
      namespaced,
      new Uint8Array(members.length),
    );
  }

  /** The target named so, the first time it is asked for; undefined when there is none (or it was taken). */
  take(namespace: string, name: string): number | undefined {
    const h = refHash(namespace, name);
    let lo = 0;
    let hi = this.hashes.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.hashes[mid]! < h) lo = mid + 1;
      else hi = mid;
    }
    for (let i = lo; i < this.hashes.length && this.hashes[i] === h; i++) {
      if (this.seen[i]) continue;
      const r = this.ref(this.order[i]!);
      if (r.name !== name || (this.namespaced && (r.namespace ?? '') !== namespace)) continue;
      this.seen[i] = 1;
      return this.order[i];
    }
    return undefined;
  }

  left(): number[] {
    const out: number[] = [];
    for (let i = 0; i < this.order.length; i++) if (!this.seen[i]) out.push(this.order[i]!);
    return out;
  }
}

/** FNV-1a over namespace, a separator no name has, and name (UTF-16 code units), as a signed 32-bit number. */
export function refHash(namespace: string, name: string): number {
  let h = 0x811c9dc5;
  const add = (s: string) => {
    for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  };
  add(namespace);
  h = Math.imul(h ^ 0x2f, 0x01000193);
  add(name);
  return h | 0;
}

/** What grouping needs of an object that has no ref. */
function refOfDesired(o: KubeObject): Ref {
  return { apiVersion: o.apiVersion, kind: o.kind, ...(o.metadata.namespace ? { namespace: o.metadata.namespace } : {}), name: o.metadata.name };
}
