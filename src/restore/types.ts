/** The restore's contract: its options, the plan it makes (one RestoreAction per object) and its result. */
import type { SchemaFinding } from '../calico/schema.js';
import type { EtcdAccessFlags } from '../calico/etcd-connection.js';
import type { BundleManifest, BundleObject } from '../bundle/types.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import type { DesiredSpool } from './spool.js';
import type { RestoreTimings } from './timings.js';

/** What restore needs from a bundle (structurally the agreed `Bundle` of src/bundle/reader.ts). */
export interface RestoreSource {
  manifest: BundleManifest;
  objects(filter?: { groups?: string[]; kinds?: string[]; lenient?: boolean }): AsyncIterable<BundleObject>;
  crds(): Promise<KubeObject[]>;
  configObjects(opts?: { lenient?: boolean }): AsyncIterable<BundleObject>;
}

export type ExistingPolicy = 'skip' | 'update' | 'replace';

export interface RestoreOptions {
  dryRun?: boolean;
  /** What to do with objects that exist in the cluster and differ (default update). */
  existing?: ExistingPolicy;
  /** Delete in-scope objects the bundle does not have. */
  prune?: boolean;
  /** Write objects without the fields the installed CRD would prune (otherwise such objects are not written). */
  dropUnknownFields?: boolean;
  allowOtherCluster?: boolean;
  /** Only these kinds (kind, plural or `<plural>.<group>`, case-insensitive). */
  kinds?: string[];
  /**
   * Only these objects (`Kind/namespace/name`, objRef): what a plan listed, e.g. apply's --restore-drift puts back
   * exactly the objects its plan showed as changed, not others of their kinds.
   */
  only?: ReadonlySet<string>;
  /** Asked with the plan before anything is written; false = refused (exit 5). Not asked on a dry run. */
  confirm?: (plan: RestorePlan) => Promise<boolean>;
  /** Requests in flight at once while planning, writing and re-reading (default DEFAULT_RESTORE_CONCURRENCY). */
  concurrency?: number;
  /**
   * Aborted = stop: while writing, the writes in flight finish, nothing more is written, the operator and the
   * datastore lock are put back and the result lists what was left (the CLI aborts it on SIGINT/SIGTERM).
   */
  signal?: AbortSignal;
  /** How long Calico CRDs and objects being deleted (the operator's teardown) may take to go before restore refuses. */
  deletionTimeoutMs?: number;
  /** How long the resumed operator may take to report Calico Available again. */
  operatorTimeoutMs?: number;
  /** Calico's etcd (etcd datastore), when flags name it instead of calico-config and calico-etcd-secrets. */
  etcd?: EtcdAccessFlags;
}

/**
 * Writes in flight at once. 16 keeps a 2-core local API server busy without a single 429 (bench/restore.ts counts
 * them); KubeClient's agent opens at most 16 sockets, so more would only queue client-side.
 */
export const DEFAULT_RESTORE_CONCURRENCY = 16;

export type RestoreActionKind = 'create' | 'update' | 'replace' | 'unchanged' | 'skip' | 'prune' | 'blocked' | 'refused' | 'unsupported';
/** Actions that write (or delete). */
export const WRITES: ReadonlySet<RestoreActionKind> = new Set(['create', 'update', 'replace', 'prune']);
/** Actions that mean "this object will not be as in the bundle": a partial restore. */
export const NOT_RESTORED: ReadonlySet<RestoreActionKind> = new Set(['blocked', 'refused', 'unsupported']);

export interface ObjectRef {
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
}

export interface RestoreAction {
  ref: ObjectRef;
  /** `Kind namespace/name` */
  id: string;
  phase: string;
  action: RestoreActionKind;
  /** Why: for skip/blocked/refused/unsupported. */
  reason?: string;
  fix?: string;
  /** Fields the installed CRD would prune or reject. */
  findings?: SchemaFinding[];
  /** live -> bundle, for update/replace. */
  diff?: string;
  notes?: string[];
  /** Set by a dry run when the API server's own dry run (fieldValidation=Strict) refuses the write. */
  serverDryRunError?: string;
  outcome?: 'done' | 'failed';
  error?: string;
  /** Paths that differ from what was written when re-read (someone else changed them). */
  drift?: string[];
  /** The live object is being deleted (finalizers hold it): a real run waits until it is gone, then creates it. */
  deleting?: boolean;
  /**
   * Every owner of the live object is gone (`Kind name`): restore takes the references off before writing anything,
   * so the garbage collector keeps it, and links it to the restored owners after (owners.ts).
   */
  goneOwners?: string[];
  /**
   * An IPAMBlock the cluster re-created after the backup, merged address by address (ipam-merge.ts): the ordinals
   * whose bundle allocation is put back (the write merges them into the block as it is then), and one line per
   * bundle allocation whose address another handle holds now (a duplicate IP: the restore is not ok).
   */
  ipam?: {
    ordinals?: number[];
    duplicates?: string[];
    /** An IPAMHandle created into blocks the cluster has (their names): the write checks that one still allocates to it. */
    recheck?: string[];
  };
}

export interface RestorePlan extends PendingDeletions {
  bundle: { id: string; cluster: BundleManifest['cluster']; calicoVersion?: string };
  cluster: { uid: string; sameCluster: boolean };
  dryRun: boolean;
  existing: ExistingPolicy;
  /** CRDs missing from the cluster that the bundle has: created first and waited on until Established. */
  crdsToCreate: string[];
  /**
   * One action per object, in order. Built from the plan's table when read (plan-table.ts withActions), so a restore
   * that never reads them never holds them all; read-only (a change to it is not the plan's).
   */
  readonly actions: RestoreAction[];
  counts: Partial<Record<RestoreActionKind, number>>;
  /** Calico CRDs and objects being deleted now, and Calico namespaces the garbage collector is about to delete: a real run lets them finish first (operator.ts). */
  /** TigeraStatus names Available in the bundle: the resumed operator must report them Available again. */
  operatorReports: string[];
}

/** What a restore waits for before it writes (operator.ts settleDeletions). */
export interface PendingDeletions {
  /** Calico CRDs and objects being deleted, most held by the tigera operator's finalizers until its teardown ends. */
  deleting: string[];
  /** Calico namespaces not deleted yet whose operator owner is gone: the garbage collector deletes them, no operator needed. */
  awaitingCollection: string[];
}

export interface RestoreResult extends RestorePlan {
  /** Every object that is not as in the bundle afterwards, with the reason. */
  failures: { id: string; action: RestoreActionKind; reason: string }[];
  drifted: { id: string; paths: string[] }[];
  /** Operator / datastore state changed for the restore and put back, or problems putting it back. */
  guards: { paused: string[]; releaseProblems: string[] };
  /** What the resumed tigera operator reported (checked), or why it is not judged ready (then not ok). */
  operator?: { checked: string[]; problem?: string };
  /**
   * Pod addresses IPAM does not hold after the restore (every pod the `pod-ip-not-allocated` check finds once the
   * datastore lock is released) and duplicate IPs met while merging IPAM: each means duplicate pod IPs to come.
   */
  ipamProblems?: string[];
  /** Everything restored as planned and nothing drifted. */
  ok: boolean;
  /** Milliseconds per phase (see timings.ts), and `total`. */
  timings: RestoreTimings;
}

/** One entry of a plan in the making: its action and what executing it needs. */
export interface Planned {
  action: RestoreAction;
  /**
   * What is written (server fields stripped, maybe pruned to the installed schema), as JSON text: a plan of
   * 100k objects holds a few hundred bytes per object instead of the parsed object (see `desiredOf`).
   */
  desiredText?: string;
  /**
   * Where the same text is when it was spooled to disk instead (spool.ts): its offset and length in bytes; then
   * desiredText is unset. Two numbers on the entry, not a slot object: one object less per entry of a 100k plan.
   */
  desiredAt?: number;
  desiredBytes?: number;
  spool?: DesiredSpool;
  /** What was actually sent (owner references re-linked or dropped): the drift check compares against it. */
  written?: KubeObject;
  /** Written without references to owners not restored yet: linked to them after the writes (owners.ts). */
  ownerPending?: boolean;
  live?: KubeObject;
  type?: ResourceType;
  rank: number;
}

/** The object a planned entry writes: parsed afresh from its text on each call, so the caller may change it. */
export function desiredOf(p: Planned): KubeObject {
  return JSON.parse(p.desiredAt !== undefined ? p.spool!.read(p.desiredAt, p.desiredBytes!) : p.desiredText!) as KubeObject;
}

/** Does the entry carry an object to write (in memory or spooled)? Refused, unsupported and prune entries do not. */
export const hasDesired = (p: Planned): boolean => p.desiredText !== undefined || p.desiredAt !== undefined;

/** Sets the object an entry writes, kept in memory (a change made while executing, to one object). */
export function setDesired(p: Planned, desired: KubeObject): void {
  p.desiredText = JSON.stringify(desired);
  delete p.desiredAt;
  delete p.desiredBytes;
  delete p.spool;
}

export const idOf = (o: { kind: string; metadata?: { namespace?: string; name: string }; namespace?: string; name?: string }): string => {
  const ns = o.metadata?.namespace ?? o.namespace;
  const name = o.metadata?.name ?? o.name;
  return `${o.kind} ${ns ? `${ns}/` : ''}${name}`;
};
/**
 * One copy of each apiVersion and kind string for all refs: a plan of 100k objects would otherwise hold 100k copies
 * of "crd.projectcalico.org/v1", one from each parsed object. Few distinct values exist; the table is bounded anyway.
 */
const shared = new Map<string, string>();
const share = (s: string): string => {
  const have = shared.get(s);
  if (have !== undefined) return have;
  if (shared.size < 10_000) shared.set(s, s);
  return s;
};
export const refOf = (o: KubeObject): ObjectRef => ({
  apiVersion: share(o.apiVersion),
  kind: share(o.kind),
  ...(o.metadata.namespace ? { namespace: o.metadata.namespace } : {}),
  name: o.metadata.name,
});
