/**
 * A restore plan's entries, held so that memory does not grow with the objects restored. A plan holds one entry per
 * object from planning until the read-back; as objects (a RestoreAction with its ref and id, and the entry holding
 * it) that was about 440 bytes of V8 heap per object, and V8 lets its heap grow to three or four times what is live
 * before it collects, so a restore of 100,000 IPAM handles peaked at 250-400 MiB where 10,000 took 150.
 *
 * So an entry with nothing to say (a create or an unchanged object, spooled, no live object kept) is a row of typed
 * arrays: its action, outcome, rank, the apiVersion and kind it shares with its kind's other entries, and where its
 * object is in the spool; its name stays a string. Only an entry with something to say (a reason, notes, a diff,
 * drift, a failure, a live object, an object kept in memory) is a `Planned` object. `get` builds an entry's
 * `Planned` when a step needs one and `set` puts back what that step made of it; the RestoreActions a plan or
 * result lists are built from the rows when asked for (`actions`).
 */
import type { ResourceType } from '../kube/types.js';
import type { DesiredSpool } from './spool.js';
import type { ObjectRef, Planned, RestoreAction, RestoreActionKind } from './types.js';

const KINDS: readonly RestoreActionKind[] = ['create', 'update', 'replace', 'unchanged', 'skip', 'prune', 'blocked', 'refused', 'unsupported'];
const KIND_INDEX = new Map(KINDS.map((k, i) => [k, i]));
/** The actions a row may have: those that never come with a reason or a diff. */
const PLAIN_KINDS: ReadonlySet<RestoreActionKind> = new Set(['create', 'unchanged']);
/** RestoreAction fields a row has no column for: an action with any of them stays an object. */
const SAYS_SOMETHING = ['reason', 'fix', 'findings', 'diff', 'notes', 'serverDryRunError', 'error', 'drift', 'deleting', 'goneOwners', 'ipam'] as const;

/** What the entries of one apiVersion and kind share. */
interface Head {
  apiVersion: string;
  kind: string;
  phase: string;
  type: ResourceType;
}

const sameType = (a: ResourceType, b: ResourceType) =>
  a === b || (a.group === b.group && a.version === b.version && a.plural === b.plural && a.kind === b.kind && a.namespaced === b.namespaced);

export class PlanTable {
  private n = 0;
  private act = new Uint8Array(256);
  private done = new Uint8Array(256);
  private ranks = new Int32Array(256);
  private head = new Uint16Array(256);
  private at = new Float64Array(256);
  private bytes = new Uint32Array(256);
  /**
   * Every entry's name as UTF-8 in one buffer (start and length by index) and its namespace as an index into the few
   * namespaces there are (-1: none). As strings in arrays, 100,000 names were 5 MB of V8 heap that lived through the
   * whole restore, and V8 lets its heap grow to a multiple of what is live (the peak RSS grew with N).
   */
  private nameBytes = Buffer.allocUnsafe(16 * 1024);
  private nameEnd = 0;
  private nameStart = new Int32Array(256);
  private nameLength = new Int32Array(256);
  private nsIndex = new Int32Array(256);
  private readonly nsNames: string[] = [];
  private readonly nsLookup = new Map<string, number>();
  private readonly heads: Head[] = [];
  private readonly headIndex = new Map<string, number>();
  /** Entries with something to say, by index: these objects are the entries (changed in place by the steps). */
  private full = new Map<number, Planned>();

  /** `spool`: where the objects of rows are (entries spooled elsewhere, or kept in memory, stay objects). */
  constructor(private readonly spool: DesiredSpool | undefined) {}

  get size(): number {
    return this.n;
  }

  /** Adds an entry; returns its index. Its name and namespace are fixed from here on. */
  add(p: Planned): number {
    const i = this.n++;
    if (i >= this.act.length) this.grow();
    this.keepName(i, p.action.ref);
    this.set(i, p);
    return i;
  }

  /** Entry `i` as an object: the kept one, or one built from its row (then `set` keeps what a step changed). */
  get(i: number): Planned {
    const f = this.full.get(i);
    if (f) return f;
    const h = this.heads[this.head[i]!]!;
    return { action: this.rowAction(i), desiredAt: this.at[i]!, desiredBytes: this.bytes[i]!, spool: this.spool, type: h.type, rank: this.ranks[i]! };
  }

  /** Puts entry `i` back as `p` says: a row when it has nothing to say, else the object itself. */
  set(i: number, p: Planned): void {
    const h = this.rowHead(p);
    if (h === undefined) {
      this.full.set(i, p);
      return;
    }
    this.full.delete(i);
    this.act[i] = KIND_INDEX.get(p.action.action)!;
    this.done[i] = p.action.outcome === 'done' ? 1 : 0;
    this.ranks[i] = p.rank;
    this.head[i] = h;
    this.at[i] = p.desiredAt!;
    this.bytes[i] = p.desiredBytes!;
  }

  /** The action of entry `i` (read without building the entry). */
  kindAt(i: number): RestoreActionKind {
    return this.full.get(i)?.action.action ?? KINDS[this.act[i]!]!;
  }

  outcomeAt(i: number): RestoreAction['outcome'] {
    const f = this.full.get(i);
    if (f) return f.action.outcome;
    return this.done[i] ? 'done' : undefined;
  }

  rankAt(i: number): number {
    return this.full.get(i)?.rank ?? this.ranks[i]!;
  }

  phaseAt(i: number): string {
    return this.full.get(i)?.action.phase ?? this.heads[this.head[i]!]!.phase;
  }

  /** apiVersion and kind of entry `i`, shared with its kind's other rows (nothing built). */
  headAt(i: number): { apiVersion: string; kind: string } {
    return this.full.get(i)?.action.ref ?? this.heads[this.head[i]!]!;
  }

  /** apiVersion, kind, namespace and name of entry `i` (a new ref for a row). */
  refAt(i: number): ObjectRef {
    const f = this.full.get(i);
    if (f) return f.action.ref;
    const h = this.heads[this.head[i]!]!;
    const ns = this.nsIndex[i]! < 0 ? undefined : this.nsNames[this.nsIndex[i]!];
    const name = this.nameBytes.toString('utf8', this.nameStart[i]!, this.nameStart[i]! + this.nameLength[i]!);
    return { apiVersion: h.apiVersion, kind: h.kind, ...(ns ? { namespace: ns } : {}), name };
  }

  /** The indexes of the entries `keep` accepts, in order. */
  where(keep: (i: number) => boolean): number[] {
    const out: number[] = [];
    for (let i = 0; i < this.n; i++) if (keep(i)) out.push(i);
    return out;
  }

  /** The entries with something to say, in order (every failure, refusal, note, drift and duplicate IP is one). */
  kept(): Planned[] {
    return [...this.full.keys()].sort((a, b) => a - b).map((i) => this.full.get(i)!);
  }

  /** Every entry's action, in order: a new array of new objects for the rows, built on each call. */
  actions(): RestoreAction[] {
    const out: RestoreAction[] = new Array(this.n);
    for (let i = 0; i < this.n; i++) out[i] = this.full.get(i)?.action ?? this.rowAction(i);
    return out;
  }

  counts(): Partial<Record<RestoreActionKind, number>> {
    const counts: Partial<Record<RestoreActionKind, number>> = {};
    for (let i = 0; i < this.n; i++) {
      const k = this.kindAt(i);
      counts[k] = (counts[k] ?? 0) + 1;
    }
    return counts;
  }

  /** Orders the entries by rank, then by id (as `localeCompare` orders them). */
  sort(): void {
    const ids = Array.from({ length: this.n }, (_, i) => this.full.get(i)?.action.id ?? idFrom(this.refAt(i)));
    const ranks = Int32Array.from({ length: this.n }, (_, i) => this.rankAt(i));
    const collator = new Intl.Collator();
    const order = Array.from({ length: this.n }, (_, i) => i).sort((a, b) => ranks[a]! - ranks[b]! || collator.compare(ids[a]!, ids[b]!));
    const pick = <T extends Uint8Array | Uint16Array | Int32Array | Float64Array | Uint32Array>(col: T): T => {
      const out = new (col.constructor as new (n: number) => T)(col.length);
      order.forEach((from, to) => (out[to] = col[from]!));
      return out;
    };
    this.act = pick(this.act);
    this.done = pick(this.done);
    this.ranks = pick(this.ranks);
    this.head = pick(this.head);
    this.at = pick(this.at);
    this.bytes = pick(this.bytes);
    this.nameStart = pick(this.nameStart);
    this.nameLength = pick(this.nameLength);
    this.nsIndex = pick(this.nsIndex);
    const full = new Map<number, Planned>();
    order.forEach((from, to) => {
      const f = this.full.get(from);
      if (f) full.set(to, f);
    });
    this.full = full;
  }

  /** The head index `p` shares with its kind when it can be a row; undefined when it stays an object. */
  private rowHead(p: Planned): number | undefined {
    const a = p.action;
    if (!PLAIN_KINDS.has(a.action) || (a.outcome && a.outcome !== 'done') || p.live || p.written || p.ownerPending || !p.type) return undefined;
    if (p.desiredAt === undefined || p.desiredText !== undefined || !this.spool || p.spool !== this.spool) return undefined;
    if (SAYS_SOMETHING.some((k) => a[k] !== undefined) || a.id !== idFrom(a.ref)) return undefined;
    const key = `${a.ref.apiVersion}\0${a.ref.kind}`;
    let h = this.headIndex.get(key);
    if (h === undefined) {
      if (this.heads.length >= 0xffff) return undefined;
      h = this.heads.push({ apiVersion: a.ref.apiVersion, kind: a.ref.kind, phase: a.phase, type: p.type }) - 1;
      this.headIndex.set(key, h);
    }
    const head = this.heads[h]!;
    return head.phase === a.phase && sameType(head.type, p.type) ? h : undefined;
  }

  private keepName(i: number, ref: ObjectRef): void {
    const need = Buffer.byteLength(ref.name);
    if (this.nameEnd + need > this.nameBytes.length) {
      const bigger = Buffer.allocUnsafe(Math.max(this.nameBytes.length * 2, this.nameEnd + need));
      this.nameBytes.copy(bigger, 0, 0, this.nameEnd);
      this.nameBytes = bigger;
    }
    this.nameStart[i] = this.nameEnd;
    this.nameLength[i] = this.nameBytes.write(ref.name, this.nameEnd);
    this.nameEnd += this.nameLength[i]!;
    if (!ref.namespace) {
      this.nsIndex[i] = -1;
      return;
    }
    let ns = this.nsLookup.get(ref.namespace);
    if (ns === undefined) this.nsLookup.set(ref.namespace, (ns = this.nsNames.push(ref.namespace) - 1));
    this.nsIndex[i] = ns;
  }

  private rowAction(i: number): RestoreAction {
    const ref = this.refAt(i);
    return {
      ref,
      id: idFrom(ref),
      phase: this.heads[this.head[i]!]!.phase,
      action: KINDS[this.act[i]!]!,
      ...(this.done[i] ? { outcome: 'done' as const } : {}),
    };
  }

  private grow(): void {
    const bigger = <T extends Uint8Array | Uint16Array | Int32Array | Float64Array | Uint32Array>(col: T): T => {
      const out = new (col.constructor as new (n: number) => T)(col.length * 2);
      out.set(col);
      return out;
    };
    this.act = bigger(this.act);
    this.done = bigger(this.done);
    this.ranks = bigger(this.ranks);
    this.head = bigger(this.head);
    this.at = bigger(this.at);
    this.bytes = bigger(this.bytes);
    this.nameStart = bigger(this.nameStart);
    this.nameLength = bigger(this.nameLength);
    this.nsIndex = bigger(this.nsIndex);
  }
}

/** `Kind namespace/name`, as idOf (types.ts) makes it. */
const idFrom = (r: ObjectRef): string => `${r.kind} ${r.namespace ? `${r.namespace}/` : ''}${r.name}`;

/**
 * Gives `plan` an enumerable `actions` built from `table` when read: JSON output and the CLI see every action, and
 * a restore that never reads them (the engine itself, apply's steps counting writes aside) never builds them. The
 * array built last is shared while someone holds it. Read-only: a change to it does not reach the plan.
 */
export function withActions<T extends object>(plan: T, table: Pick<PlanTable, 'actions'>): T & { readonly actions: RestoreAction[] } {
  let last: WeakRef<RestoreAction[]> | undefined;
  return Object.defineProperty(plan, 'actions', {
    enumerable: true,
    configurable: true,
    get: () => {
      let a = last?.deref();
      if (!a) last = new WeakRef((a = table.actions()));
      return a;
    },
  }) as T & { readonly actions: RestoreAction[] };
}

/** `plan` with `extra` added, without building its actions (a spread would read the getter). */
export function extendPlan<P extends object, E extends object>(plan: P, extra: E): P & E {
  return Object.assign(Object.defineProperties({}, Object.getOwnPropertyDescriptors(plan)), extra) as P & E;
}
