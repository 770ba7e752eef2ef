/**
 * `restore --resources`: put a bundle's Calico objects back into a cluster, in dependency order, previewed,
 * schema-aware, without the operator or Calico's IPAM controllers fighting the writes, and verified after.
 *
 * Two stages: `planRestore` reads everything and decides one RestoreAction per object (writes nothing);
 * `executeRestore` carries a plan out. `restoreResources` is both, with the confirmation in between.
 */
import { performance } from 'node:perf_hooks';
import { CALICO_CRD_GROUP, CALICO_GROUPS, OPERATOR_DEPLOYMENT, OPERATOR_NAMESPACE, SHARED_POLICY_GROUP } from '../calico/knowledge.js';
import { checkAgainstSchema, pruneUnknownFields, type SchemaFinding } from '../calico/schema.js';
import { matchesKind } from '../bundle/reader.js';
import type { BundleManifest, BundleObject } from '../bundle/types.js';
import { BadInputError, RefusedError, errorMessage } from '../errors.js';
import type { Reporter } from '../io/host.js';
import { K } from '../kube/builtin.js';
import { clusterUid } from '../kube/cluster-uid.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import { crdResourceType, listCrds } from '../kube/discovery.js';
import { waitCrdsEstablished } from '../kube/manifests.js';
import { pool } from '../util/pool.js';
import { ResourceResolver } from '../kube/resolver.js';
import { groupOf, type KubeObject, type ResourceType } from '../kube/types.js';
import { lockDatastore, pauseOperator, releaseAll, type Release } from './guards.js';
import { objectDiff, sameContent, stripServerFields } from './normalize.js';
import { CLUSTER_INFORMATION, INSTALLATION_KIND, INSTALLATION_NAME, NEVER_RESTORED_KINDS, RESTORED_CONFIG_KINDS, RESTORE_PHASES, OTHER_PHASE, RUNTIME_FIELDS, phaseOf } from './order.js';
import { judgePool } from './pools.js';
import { PhaseTimer, type RestoreTimings } from './timings.js';
import { findDrift } from './drift.js';
import { admissionRefusal, isCalicoCrd, isReferenceOnlyConfig } from './admission.js';
import { isIpamLive, mergeIpamPlan } from './ipam.js';

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
  /** Asked with the plan before anything is written; false = refused (exit 5). Not asked on a dry run. */
  confirm?: (plan: RestorePlan) => Promise<boolean>;
  /** Requests in flight at once while planning, writing and re-reading (default DEFAULT_RESTORE_CONCURRENCY). */
  concurrency?: number;
}

/**
 * Writes in flight at once. 16 keeps a 2-core local API server busy without a single 429 (bench/restore.ts counts
 * them); KubeClient's agent opens at most 16 sockets, so more would only queue client-side.
 */
export const DEFAULT_RESTORE_CONCURRENCY = 16;

export type RestoreActionKind = 'create' | 'update' | 'replace' | 'unchanged' | 'skip' | 'prune' | 'blocked' | 'refused' | 'unsupported';
/** Actions that write (or delete). */
const WRITES: ReadonlySet<RestoreActionKind> = new Set(['create', 'update', 'replace', 'prune']);
/** Actions that mean "this object will not be as in the bundle": a partial restore. */
const NOT_RESTORED: ReadonlySet<RestoreActionKind> = new Set(['blocked', 'refused', 'unsupported']);

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
}

export interface RestorePlan {
  bundle: { id: string; cluster: BundleManifest['cluster']; calicoVersion?: string };
  cluster: { uid: string; sameCluster: boolean };
  dryRun: boolean;
  existing: ExistingPolicy;
  /** CRDs missing from the cluster that the bundle has: created first and waited on until Established. */
  crdsToCreate: string[];
  actions: RestoreAction[];
  counts: Partial<Record<RestoreActionKind, number>>;
}

export interface RestoreResult extends RestorePlan {
  /** Every object that is not as in the bundle afterwards, with the reason. */
  failures: { id: string; action: RestoreActionKind; reason: string }[];
  drifted: { id: string; paths: string[] }[];
  /** Operator / datastore state changed for the restore and put back, or problems putting it back. */
  guards: { paused: string[]; releaseProblems: string[] };
  /** Everything restored as planned and nothing drifted. */
  ok: boolean;
  /** Milliseconds per phase (see timings.ts), and `total`. */
  timings: RestoreTimings;
}

interface Planned {
  action: RestoreAction;
  /**
   * What is written (server fields stripped, maybe pruned to the installed schema), as JSON text: a plan of
   * 100k objects holds a few hundred bytes per object instead of the parsed object (see `desiredOf`).
   */
  desiredText?: string;
  /** What was actually sent (owner references re-linked or dropped): the drift check compares against it. */
  written?: KubeObject;
  live?: KubeObject;
  type?: ResourceType;
  rank: number;
}

/** The object a planned entry writes: parsed afresh from its text on each call, so the caller may change it. */
function desiredOf(p: Planned): KubeObject {
  return JSON.parse(p.desiredText!) as KubeObject;
}

/** Run `fn` over an async stream of items, at most `limit` at once, without collecting the stream first. */
async function poolStream<T>(items: AsyncIterable<T>, limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  const running = new Set<Promise<void>>();
  let failed: unknown;
  for await (const item of items) {
    if (failed) break;
    const p: Promise<void> = fn(item).then(
      () => void running.delete(p),
      (err) => {
        running.delete(p);
        failed ??= { err };
      },
    );
    running.add(p);
    if (running.size >= limit) await Promise.race(running);
  }
  await Promise.all(running);
  if (failed) throw (failed as { err: unknown }).err;
}

const idOf = (o: { kind: string; metadata?: { namespace?: string; name: string }; namespace?: string; name?: string }): string => {
  const ns = o.metadata?.namespace ?? o.namespace;
  const name = o.metadata?.name ?? o.name;
  return `${o.kind} ${ns ? `${ns}/` : ''}${name}`;
};
const refOf = (o: KubeObject): ObjectRef => ({ apiVersion: o.apiVersion, kind: o.kind, ...(o.metadata.namespace ? { namespace: o.metadata.namespace } : {}), name: o.metadata.name });
const crdKey = (group: string, kind: string) => `${group}\0${kind}`;
const ownerKey = (apiVersion: string, kind: string, name: string, namespace: string | undefined) => `${apiVersion}\0${kind}\0${namespace ?? ''}\0${name}`;

function matchesKinds(obj: KubeObject, kinds: string[] | undefined): boolean {
  if (!kinds?.length) return true;
  return kinds.some((k) => k.toLowerCase() === obj.kind.toLowerCase() || k.toLowerCase() === `${obj.kind.toLowerCase()}s`);
}

// ---------- planning ----------

export async function planRestore(
  client: KubeClient,
  bundle: RestoreSource,
  opts: RestoreOptions,
  reporter: Reporter,
  timer = new PhaseTimer(),
): Promise<{ plan: RestorePlan; planned: Planned[]; bundleCrds: Map<string, KubeObject> }> {
  const planStart = performance.now();
  const before = { readBundle: timer.spent('readBundle'), readCluster: timer.spent('readCluster'), schemaCheck: timer.spent('schemaCheck') };
  const existing = opts.existing ?? 'update';
  if (!['skip', 'update', 'replace'].includes(existing)) throw new BadInputError(`--existing must be skip, update or replace (got "${existing}")`);
  const m = bundle.manifest;
  // A mistyped --kinds word must not turn into a restore of nothing that reports success.
  const configKind = (k: string) => [...RESTORED_CONFIG_KINDS].some((c) => [c.toLowerCase(), `${c.toLowerCase()}s`].includes(k.toLowerCase()));
  const unknownKinds = (opts.kinds ?? []).filter((k) => !configKind(k) && !m.resources.some((r) => matchesKind(r, [k])));
  if (unknownKinds.length) throw new BadInputError(`--kinds ${unknownKinds.join(', ')}: no such kind in bundle ${m.id}`, { hint: 'see the kinds it holds with: cni-rewind inspect BUNDLE' });

  const uid = await timer.time('readCluster', () => clusterUid(client));
  const sameCluster = !!m.cluster?.uid && m.cluster.uid === uid;
  if (!sameCluster && !opts.allowOtherCluster) {
    throw new RefusedError(`bundle ${m.id} was exported from cluster ${m.cluster?.name ?? '?'} (${m.cluster?.uid || 'no uid'}), not from this cluster (${uid})`, {
      hint: 'restoring another cluster\'s IP pools and IPAM here can hand out addresses that are in use elsewhere; add --allow-other-cluster if this is really what you want',
    });
  }
  if (!sameCluster) reporter.warn('CNR_RESTORE_OTHER_CLUSTER', `restoring bundle of cluster ${m.cluster?.name} (${m.cluster?.uid}) into cluster ${uid} (--allow-other-cluster)`);

  // Two passes over the bundle, so the plan never holds the bundle's objects: the first reads and checks every
  // file (a corrupt one fails here, before anything is written) and keeps only what planning needs of all of
  // them (their keys, namespaces, groups, the Installation); the second plans object by object as it reads.
  reporter.info('CNR_RESTORE_READ', `reading bundle ${m.id}`);
  // Objects the bundle holds but restore never writes (not Calico's, or filed under another path): named, refused.
  const refused: Planned[] = [];
  const refuse = (o: KubeObject, reason: string) => refused.push({ action: { ref: refOf(o), id: idOf(o), phase: phaseOf(o).phase.id, action: 'refused', reason }, rank: phaseOf(o).rank });
  /** The bundle objects restore writes, in the order read; the first pass also records the refused ones. */
  async function* restorable(first: boolean): AsyncGenerator<KubeObject> {
    for await (const bo of bundle.objects({ ...(opts.kinds?.length ? { kinds: opts.kinds } : {}), lenient: true })) {
      const no = admissionRefusal(bo, 'resources');
      if (no) {
        if (first) refuse(bo.object, no);
      } else if (!NEVER_RESTORED_KINDS.has(bo.object.kind)) yield bo.object;
    }
    for await (const bo of bundle.configObjects({ lenient: true })) {
      if (!matchesKinds(bo.object, opts.kinds) || isReferenceOnlyConfig(bo)) continue;
      const no = admissionRefusal(bo, 'config');
      if (no) {
        if (first) refuse(bo.object, no);
      } else yield bo.object;
    }
  }
  const inBundle = new Set<string>();
  /** `<group>\0<id>` of every object restored: what --prune keeps. */
  const bundleIds = new Set<string>();
  const namespaces = new Set<string>();
  const haveNs = new Set<string>();
  const neededGroups = new Set<string>();
  let installation: KubeObject | undefined;
  let count = 0;
  const bundleCrdList = await timer.time('readBundle', async () => {
    for await (const o of restorable(true)) {
      count++;
      inBundle.add(ownerKey(o.apiVersion, o.kind, o.metadata.name, o.metadata.namespace));
      bundleIds.add(`${groupOf(o.apiVersion)}\0${idOf(o)}`);
      neededGroups.add(groupOf(o.apiVersion));
      if (o.metadata.namespace) namespaces.add(o.metadata.namespace);
      if (o.kind === 'Namespace') haveNs.add(o.metadata.name);
      if (o.kind === INSTALLATION_KIND && groupOf(o.apiVersion) === 'operator.tigera.io' && o.metadata.name === INSTALLATION_NAME) installation = o;
    }
    const crds = await bundle.crds();
    for (const c of crds) if (!isCalicoCrd(c)) refuse(c, `not restored: CustomResourceDefinition ${c.metadata.name} is not of a Calico group`);
    return crds.filter(isCalicoCrd);
  });
  for (const r of refused) reporter.warn('CNR_RESTORE_REFUSED_OBJECT', `${r.action.id}: ${r.action.reason}`);
  const bundleCrds = new Map(bundleCrdList.map((c) => [crdKey(c.spec.group, c.spec.names.kind), c]));

  // Namespaces the namespaced objects need (the bundle records objects, not their namespaces).
  const extraNs: KubeObject[] = [...namespaces].filter((ns) => !haveNs.has(ns)).map((ns) => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } }));
  for (const o of extraNs) {
    inBundle.add(ownerKey(o.apiVersion, o.kind, o.metadata.name, undefined));
    bundleIds.add(`\0${idOf(o)}`);
    neededGroups.add('');
  }

  const liveCrds = new Map((await timer.time('readCluster', () => listCrds(client))).map((c) => [crdKey(c.spec.group, c.spec.names.kind), c]));
  const crdsToCreate = bundleCrdList.filter((c) => neededGroups.has(c.spec.group) && !liveCrds.has(crdKey(c.spec.group, c.spec.names.kind)));

  // Planning creates no CRD, so a group-version found missing stays missing: ask discovery once, not per object.
  const resolver = new ResourceResolver(client, { cacheMissing: true });
  const operator = await timer.time('readCluster', () => client.getOrUndefined(K.deployment, OPERATOR_NAMESPACE, OPERATOR_DEPLOYMENT));
  const operatorImage: string | undefined = (operator?.spec?.template?.spec?.containers ?? []).find((c: any) => c.name === 'tigera-operator')?.image ?? operator?.spec?.template?.spec?.containers?.[0]?.image;

  const liveIndex = new LiveIndex(client, timer);
  const planned: Planned[] = [];
  const ctx = { existing, liveCrds, bundleCrds, dropUnknownFields: !!opts.dropUnknownFields, installation, operatorImage, inBundle, liveIndex, timer };
  // The second pass: its reading is timed as reading the bundle, the rest as planning.
  async function* secondPass(): AsyncGenerator<KubeObject> {
    const it = restorable(false)[Symbol.asyncIterator]();
    for (;;) {
      const r = await timer.time('readBundle', () => it.next());
      if (r.done) break;
      yield r.value;
    }
    yield* extraNs;
  }
  await poolStream(secondPass(), opts.concurrency ?? DEFAULT_RESTORE_CONCURRENCY, async (obj) => {
    planned.push(await planOne(client, resolver, obj, ctx));
  });
  // The bundle changed between the two passes (it is read twice): what was checked is not what was planned.
  if (planned.length !== count + extraNs.length) throw new BadInputError(`bundle ${m.id} changed while it was read (${count + extraNs.length} objects, then ${planned.length})`);
  // The merge reads the desired object of IPAM entries only; the plan keeps objects as JSON text, so each is parsed
  // when read (a getter), never held parsed for the whole plan.
  const ipamViews = planned
    .filter((p) => p.desiredText && isIpamLive(p.action.ref))
    .map((p) => ({ action: p.action, live: p.live, get desired() { return desiredOf(p); } }));
  const ipamKept = await mergeIpamPlan(ipamViews, {
    liveBlocks: async () => {
      const t = await resolver.resolve(`${CALICO_CRD_GROUP}/v1`, 'IPAMBlock');
      return t ? timer.time('readCluster', () => client.listAll(t)) : [];
    },
    bundleBlocks: () => timer.time('readBundle', async () => {
      const out: KubeObject[] = [];
      for await (const bo of bundle.objects({ groups: [CALICO_CRD_GROUP], kinds: ['IPAMBlock'], lenient: true })) out.push(bo.object);
      return out;
    }),
  });
  if (ipamKept) reporter.info('CNR_RESTORE_IPAM_LIVE', `${ipamKept} IPAM objects kept as the cluster has them: IPAM is live state (allocations made or released since the backup are not undone)`);
  planned.push(...refused);
  for (const p of planned) for (const n of p.action.notes ?? []) if (n.startsWith('ownerReferences')) reporter.warn('CNR_RESTORE_OWNER_DROPPED', `${p.action.id}: ${n}`);

  if (opts.prune) planned.push(...(await timer.time('readCluster', () => planPrune(client, resolver, bundle.manifest, bundleIds, opts.kinds))));
  planned.sort((a, b) => a.rank - b.rank || a.action.id.localeCompare(b.action.id));

  const actions = planned.map((p) => p.action);
  const plan: RestorePlan = {
    bundle: { id: m.id, cluster: m.cluster, calicoVersion: m.calico?.version },
    cluster: { uid, sameCluster },
    dryRun: !!opts.dryRun,
    existing,
    crdsToCreate: crdsToCreate.map((c) => c.metadata.name).sort(),
    actions,
    counts: countActions(actions),
  };
  // What planning spent that is not reading the bundle or the cluster or checking schemas: comparing, diffing, ordering.
  const spent = (k: keyof typeof before) => timer.spent(k) - before[k];
  timer.add('plan', Math.max(0, performance.now() - planStart - spent('readBundle') - spent('readCluster') - spent('schemaCheck')));
  return { plan, planned, bundleCrds };
}

function countActions(actions: RestoreAction[]): Partial<Record<RestoreActionKind, number>> {
  const counts: Partial<Record<RestoreActionKind, number>> = {};
  for (const a of actions) counts[a.action] = (counts[a.action] ?? 0) + 1;
  return counts;
}

async function planOne(
  client: KubeClient,
  resolver: ResourceResolver,
  obj: KubeObject,
  ctx: { existing: ExistingPolicy; liveCrds: Map<string, KubeObject>; bundleCrds: Map<string, KubeObject>; dropUnknownFields: boolean; installation?: KubeObject; operatorImage?: string; inBundle: Set<string>; liveIndex: LiveIndex; timer: PhaseTimer },
): Promise<Planned> {
  const { phase, rank } = phaseOf(obj);
  const action: RestoreAction = { ref: refOf(obj), id: idOf(obj), phase: phase.id, action: 'create' };
  const group = groupOf(obj.apiVersion);
  const liveCrd = ctx.liveCrds.get(crdKey(group, obj.kind));
  const crd = liveCrd ?? ctx.bundleCrds.get(crdKey(group, obj.kind));
  let type = await resolver.forObject(obj);
  if (!type && crd && !liveCrd) {
    const t = crdResourceType(crd);
    if (`${t.group}/${t.version}` === obj.apiVersion || crd.spec.versions?.some((v: any) => `${group}/${v.name}` === obj.apiVersion && v.served)) type = { ...t, version: obj.apiVersion.split('/')[1]! };
  }
  if (!type) {
    return { action: { ...action, action: 'unsupported', reason: `the cluster does not serve ${obj.apiVersion} ${obj.kind} and the bundle has no CRD for it` }, rank };
  }

  let desired = stripServerFields(obj);
  const notes: string[] = [];
  if (crd) {
    const findings = ctx.timer.sync('schemaCheck', () => checkAgainstSchema(desired, crd));
    if (findings.length) {
      action.findings = findings;
      const rejected = findings.filter((f) => f.kind === 'rejected');
      const pruned = findings.filter((f) => f.kind === 'pruned');
      const where = liveCrd ? 'the CRD installed in the cluster' : 'the CRD from the bundle';
      if (rejected.length) {
        action.action = 'blocked';
        action.reason = `${where} rejects ${rejected.map((f) => `${f.path} (${f.detail})`).join('; ')}`;
        action.fix = 'install CRDs that accept these values (e.g. plan/apply to the bundle\'s Calico version), then restore again';
      } else if (!ctx.dropUnknownFields) {
        action.action = 'blocked';
        action.reason = `${where} does not know ${pruned.map((f) => f.path).join(', ')}: writing it would lose them`;
        action.fix = 'restore with --drop-unknown-fields to write the object without these fields, or install the bundle\'s CRD version first';
      } else {
        desired = ctx.timer.sync('schemaCheck', () => pruneUnknownFields(desired, crd));
        notes.push(`written without ${pruned.map((f) => f.path).join(', ')} (unknown to the installed CRD; --drop-unknown-fields)`);
      }
    }
  }

  if (obj.kind === 'IPPool' && group === CALICO_CRD_GROUP) {
    const verdict = judgePool(desired, ctx.installation, ctx.operatorImage);
    if (verdict.refusal && action.action !== 'blocked') {
      action.action = 'refused';
      action.reason = verdict.refusal.reason;
      action.fix = verdict.refusal.fix;
    }
    if (verdict.note) notes.push(verdict.note);
  }
  // Owners neither in the cluster nor in the bundle will not exist: drop those references now, so the
  // preview says so and an object restored before is not seen as changed on every run.
  const refs = desired.metadata.ownerReferences;
  if (refs?.length) {
    const kept = [];
    for (const r of refs) {
      const ns = desired.metadata.namespace;
      if (ctx.inBundle.has(ownerKey(r.apiVersion, r.kind, r.name, ns)) || ctx.inBundle.has(ownerKey(r.apiVersion, r.kind, r.name, undefined))) kept.push(r);
      else {
        const t = await resolver.resolve(r.apiVersion, r.kind);
        const owner = t ? await client.getOrUndefined(t, t.namespaced ? ns : undefined, r.name) : undefined;
        if (owner) kept.push(r);
        else notes.push(`ownerReferences to ${r.kind} ${r.name} dropped: the owner is neither in the cluster nor in the bundle`);
      }
    }
    if (kept.length) desired.metadata.ownerReferences = kept;
    else delete desired.metadata.ownerReferences;
  }
  if (notes.length) action.notes = notes;

  let live: KubeObject | undefined;
  if (liveCrd || !crd) live = await ctx.liveIndex.get(type, obj.metadata.namespace, obj.metadata.name);
  if (live) desired = keepRuntimeFields(desired, live);
  if (action.action === 'create') {
    if (!live) action.action = 'create';
    else if (sameContent(live, desired) || (obj.kind === 'Namespace' && group === '')) action.action = 'unchanged';
    else if (ctx.existing === 'skip') {
      action.action = 'skip';
      action.reason = 'exists and differs; --existing skip';
      action.diff = objectDiff(live, desired, action.id);
    } else {
      action.action = ctx.existing;
      action.diff = objectDiff(live, desired, action.id);
    }
  }
  // Text, not the object: the plan of a large bundle holds every entry until the restore ends. The live object is
  // kept only where a write needs it (a replace's resourceVersion, a dry run's check); creates have none.
  return { action, desiredText: JSON.stringify(desired), ...(live && action.action !== 'unchanged' ? { live } : {}), type, rank };
}

/** The live values of RUNTIME_FIELDS replace the bundle's. */
function keepRuntimeFields(desired: KubeObject, live: KubeObject): KubeObject {
  const out = structuredClone(desired);
  for (const f of RUNTIME_FIELDS) {
    if (f.kind !== desired.kind) continue;
    const get = (o: any) => f.path.reduce((x, k) => (x && typeof x === 'object' ? x[k] : undefined), o);
    const parent = f.path.slice(0, -1).reduce((x: any, k) => (x[k] ??= {}), out as any);
    const last = f.path[f.path.length - 1]!;
    const v = get(live);
    if (v === undefined) delete parent[last];
    else parent[last] = v;
  }
  return out;
}

/**
 * Live objects for planning: custom resources are listed once per type (paged) instead of one GET per object,
 * which matters for thousands of IPAM blocks and handles; core objects (a few ConfigMaps, Secrets, Namespaces)
 * are fetched one by one rather than listing every Secret of the cluster.
 */
class LiveIndex {
  private readonly lists = new Map<string, Promise<Map<string, KubeObject>>>();
  constructor(
    private readonly client: KubeClient,
    private readonly timer: PhaseTimer,
  ) {}

  async get(type: ResourceType, namespace: string | undefined, name: string): Promise<KubeObject | undefined> {
    if (!type.group) return this.timer.time('readCluster', () => this.client.getOrUndefined(type, namespace, name));
    const key = `${type.group}/${type.version}/${type.plural}`;
    let list = this.lists.get(key);
    if (!list) {
      list = this.timer.time('readCluster', () => this.client.listAll(type)).then(
        (items) => new Map(items.map((o) => [`${o.metadata.namespace ?? ''}/${o.metadata.name}`, o])),
        (err) => {
          if (err instanceof KubeApiError && err.notFound) return new Map<string, KubeObject>();
          throw err;
        },
      );
      this.lists.set(key, list);
    }
    return (await list).get(`${type.namespaced ? namespace ?? '' : ''}/${name}`);
  }
}

/** Live objects of the bundle's Calico kinds that the bundle does not have. */
async function planPrune(client: KubeClient, resolver: ResourceResolver, manifest: BundleManifest, inBundle: Set<string>, kinds?: string[]): Promise<Planned[]> {
  const out: Planned[] = [];
  for (const r of manifest.resources) {
    if (![...CALICO_GROUPS, SHARED_POLICY_GROUP].includes(r.group) || NEVER_RESTORED_KINDS.has(r.kind)) continue;
    if (kinds?.length && !kinds.some((k) => [r.kind, r.plural, r.key].map((x) => x.toLowerCase()).includes(k.toLowerCase()))) continue;
    const type = await resolver.resolve(`${r.group}/${r.version}`, r.kind);
    if (!type) continue;
    for (const live of await client.listAll(type)) {
      // IPAM objects the bundle lacks hold allocations made since the backup (ipam.ts).
      if (inBundle.has(`${r.group}\0${idOf(live)}`) || isIpamLive(live)) continue;
      const { phase, rank } = phaseOf(live);
      out.push({
        action: { ref: refOf(live), id: idOf(live), phase: phase.id, action: 'prune', reason: 'not in the bundle; --prune' },
        live,
        type,
        // Deleted after everything is written, last-written kinds first.
        rank: 100_000 - rank,
      });
    }
  }
  return out;
}

// ---------- executing ----------

/** Dry run: ask the API server whether each write would be accepted (strict field validation), writing nothing. */
async function serverDryRun(client: KubeClient, planned: Planned[], concurrency: number): Promise<void> {
  const writes = planned.filter((p) => p.type && p.desiredText && ['create', 'update', 'replace'].includes(p.action.action) && p.action.phase !== 'config');
  await pool(writes, concurrency, async (p) => {
    // Objects whose CRD does not exist yet cannot be checked by the server; the schema check covered them.
    if (!p.live && p.action.action !== 'create') return;
    try {
      const body = bodyFor(p, undefined);
      if (p.action.action === 'create') await client.create(p.type!, body, { dryRun: true, fieldValidation: 'Strict' });
      else await client.replace(p.type!, { ...body, metadata: { ...body.metadata, resourceVersion: p.live!.metadata.resourceVersion } }, { dryRun: true, fieldValidation: 'Strict' });
    } catch (err) {
      if (err instanceof KubeApiError && err.statusCode === 404) return; // CRD not installed yet
      if (err instanceof KubeApiError && err.statusCode >= 400 && err.statusCode < 500) p.action.serverDryRunError = err.message;
      else throw err;
    }
  });
}

/**
 * The body to write: desired with ownerReferences re-linked to the owners' current UIDs (an owner that is
 * missing is dropped and listed in `dropped`). `ownerUids` undefined (dry run): references left as they are.
 */
function bodyFor(p: Planned, ownerUids: Map<string, string | undefined> | undefined, dropped?: string[]): KubeObject {
  // desiredOf parses a fresh copy: re-linking changes it, never the plan.
  const body = desiredOf(p);
  if (!body.metadata.ownerReferences?.length || !ownerUids) return body;
  const refs = body.metadata.ownerReferences;
  if (refs?.length) {
    const kept = [];
    for (const r of refs) {
      const uid = ownerUids.get(`${r.apiVersion}\0${r.kind}\0${r.name}`);
      if (uid) kept.push({ ...r, uid });
      else dropped?.push(`${r.kind} ${r.name}`);
    }
    if (kept.length) body.metadata.ownerReferences = kept;
    else delete body.metadata.ownerReferences;
  }
  return body;
}

async function ownerUidsFor(client: KubeClient, resolver: ResourceResolver, desired: KubeObject, cache: Map<string, string | undefined>): Promise<Map<string, string | undefined>> {
  const out = new Map<string, string | undefined>();
  for (const r of desired.metadata.ownerReferences ?? []) {
    const key = `${r.apiVersion}\0${r.kind}\0${r.name}`;
    const cacheKey = `${key}\0${desired.metadata.namespace ?? ''}`;
    if (!cache.has(cacheKey)) {
      const t = await resolver.resolve(r.apiVersion, r.kind);
      const owner = t ? await client.getOrUndefined(t, t.namespaced ? desired.metadata.namespace : undefined, r.name) : undefined;
      cache.set(cacheKey, owner?.metadata.uid);
    }
    out.set(key, cache.get(cacheKey));
  }
  return out;
}

async function writeOne(client: KubeClient, resolver: ResourceResolver, p: Planned, ownerCache: Map<string, string | undefined>, reporter: Reporter): Promise<KubeObject> {
  const desired = desiredOf(p);
  const type = (await resolver.forObject(desired)) ?? p.type!;
  const owners = await ownerUidsFor(client, resolver, desired, ownerCache);
  const dropped: string[] = [];
  const body = bodyFor(p, owners, dropped);
  if (dropped.length) {
    const note = `ownerReferences to ${dropped.join(', ')} dropped: the owner does not exist in the cluster`;
    (p.action.notes ??= []).push(note);
    reporter.warn('CNR_RESTORE_OWNER_DROPPED', `${p.action.id}: ${note}`);
  }
  // Kept for the drift check only when it differs from the plan's text (owner references re-linked or dropped).
  if (desired.metadata.ownerReferences?.length) p.written = body;
  const strict = { fieldValidation: 'Strict' as const };
  switch (p.action.action) {
    case 'create':
      try {
        return await client.create(type, body, strict);
      } catch (err) {
        if (!(err instanceof KubeApiError && err.conflict)) throw err;
        // Created meanwhile (by a controller): make it what the bundle says.
        const live = await client.get(type, body.metadata.namespace, body.metadata.name);
        return await client.replace(type, withLiveMeta(body, live), strict);
      }
    case 'update': {
      const live = await client.get(type, body.metadata.namespace, body.metadata.name);
      return await client.replace(type, withLiveMeta(body, live), strict);
    }
    case 'replace': {
      await client.delete(type, body.metadata.namespace, body.metadata.name);
      await client.waitFor(`${p.action.id} to be deleted`, async () => ((await client.getOrUndefined(type, body.metadata.namespace, body.metadata.name)) ? undefined : true), { timeoutMs: 60_000, intervalMs: 200 });
      return await client.create(type, body, strict);
    }
    default:
      throw new Error(`not a write: ${p.action.action}`);
  }
}

/** An update keeps what the server and other controllers own in metadata (finalizers, owners we do not know of). */
function withLiveMeta(body: KubeObject, live: KubeObject): KubeObject {
  return {
    ...body,
    metadata: {
      ...body.metadata,
      resourceVersion: live.metadata.resourceVersion,
      ...(body.metadata.finalizers === undefined && live.metadata.finalizers ? { finalizers: live.metadata.finalizers } : {}),
    },
    // Status is not restored; keep the live one so a PUT to a CRD without a status subresource does not wipe it.
    ...(live.status !== undefined ? { status: live.status } : {}),
  };
}

export async function executeRestore(
  client: KubeClient,
  plan: RestorePlan,
  planned: Planned[],
  bundleCrds: Map<string, KubeObject>,
  opts: RestoreOptions,
  reporter: Reporter,
  timer = new PhaseTimer(),
): Promise<RestoreResult> {
  const concurrency = opts.concurrency ?? DEFAULT_RESTORE_CONCURRENCY;
  const resolver = new ResourceResolver(client);
  const writes = planned.filter((p) => WRITES.has(p.action.action));
  const releases: Release[] = [];
  const paused: string[] = [];
  let releaseProblems: string[] = [];
  const ciType: ResourceType = { group: CALICO_CRD_GROUP, version: 'v1', plural: 'clusterinformations', kind: CLUSTER_INFORMATION.kind, namespaced: false };
  const ciBefore = plan.crdsToCreate.includes(`clusterinformations.${CALICO_CRD_GROUP}`) ? undefined : await timer.time('guards', () => client.getOrUndefined(ciType, undefined, CLUSTER_INFORMATION.name).catch(() => undefined));
  // A ClusterInformation this run creates is created already locked when IPAM will be written, so Calico never
  // sees datastoreReady=true with IPAM half-restored; the lock is released to the bundle's value.
  const ipamWrites = writes.some((p) => RESTORE_PHASES.find((ph) => ph.id === p.action.phase)?.datastoreLock && p.action.action !== 'prune');
  const ciCreate = writes.find((p) => p.action.action === 'create' && p.action.ref.kind === CLUSTER_INFORMATION.kind && p.action.ref.name === CLUSTER_INFORMATION.name && p.desiredText);
  let lockPrior: boolean | undefined = ciBefore ? (ciBefore.spec?.datastoreReady as boolean | undefined) : undefined;
  if (ipamWrites && ciCreate) {
    const ci = desiredOf(ciCreate);
    lockPrior = ci.spec?.datastoreReady as boolean | undefined;
    ciCreate.desiredText = JSON.stringify({ ...ci, spec: { ...ci.spec, datastoreReady: false } });
  }

  // Ctrl-C or SIGTERM while writing: finish the writes in flight, write nothing more, put the operator and the
  // datastore lock back (the default signal action would exit without doing that), and report what was left.
  let interrupted: string | undefined;
  const onSignal = (sig: NodeJS.Signals) => {
    if (interrupted) return;
    interrupted = sig;
    reporter.warn('CNR_RESTORE_INTERRUPTED', `${sig}: stopping after the writes in flight, then putting the operator and the datastore lock back`);
  };
  if (writes.length || plan.crdsToCreate.length) {
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    try {
      // 1. CRDs missing from the cluster, from the bundle, until Established.
      if (plan.crdsToCreate.length) {
        const crds = [...bundleCrds.values()].filter((c) => plan.crdsToCreate.includes(c.metadata.name));
        reporter.info('CNR_RESTORE_CRDS', `creating ${crds.length} CRD(s) from the bundle: ${plan.crdsToCreate.join(', ')}`);
        await timer.time('createCrds', async () => {
          await pool(crds, 4, async (c) => {
            const body = stripServerFields(c);
            await client.create(K.crd, body);
          });
          await waitCrdsEstablished(client, plan.crdsToCreate);
        });
        resolver.forget();
      }
      // 2. Keep the operator from rewriting what we write.
      const op = await timer.time('guards', () => pauseOperator(client, reporter));
      if (op) {
        releases.push(op);
        paused.push(op.what);
      }
      // 3. Phase by phase; within a phase kind by kind (rank), objects of one kind in parallel.
      const ownerCache = new Map<string, string | undefined>();
      let done = 0;
      const total = writes.filter((p) => p.action.action !== 'prune').length;
      const phases = [...RESTORE_PHASES, OTHER_PHASE];
      let locked = false;
      for (const phase of phases) {
        const inPhase = writes.filter((p) => p.action.phase === phase.id && p.action.action !== 'prune');
        if (!inPhase.length) continue;
        if (phase.datastoreLock && !locked) {
          locked = true; // taken once, for every locked phase (pools, then IPAM), released at the end
          const lock = await timer.time('guards', () => lockDatastore(client, ciType, reporter, lockPrior));
          if (lock) {
            releases.push(lock);
            paused.push(lock.what);
          }
        }
        reporter.info('CNR_RESTORE_PHASE', `restoring ${phase.title} (${inPhase.length} object(s))`, { phase: phase.id, count: inPhase.length });
        const ranks = [...new Set(inPhase.map((p) => p.rank))].sort((a, b) => a - b);
        for (const rank of ranks) {
          await timer.time('write', () => pool(inPhase.filter((p) => p.rank === rank), concurrency, async (p) => {
            if (interrupted) {
              p.action.outcome = 'failed';
              p.action.error = `not written: restore interrupted (${interrupted})`;
              return;
            }
            try {
              const written = await writeOne(client, resolver, p, ownerCache, reporter);
              p.action.outcome = 'done';
              const ref = p.action.ref;
              if (written?.metadata?.uid) ownerCache.set(`${ref.apiVersion}\0${ref.kind}\0${ref.name}\0${ref.namespace ?? ''}`, written.metadata.uid);
              reporter.info('CNR_RESTORE_OBJECT', `${pastTense(p.action.action)} ${p.action.id}`, { id: p.action.id, action: p.action.action });
            } catch (err) {
              p.action.outcome = 'failed';
              p.action.error = errorMessage(err);
              reporter.error('CNR_RESTORE_OBJECT_FAILED', `${p.action.id}: ${p.action.action} failed: ${p.action.error}`, { id: p.action.id, action: p.action.action });
            }
            reporter.progress({ id: 'restore', label: 'restoring objects', current: ++done, total });
          }));
        }
      }
      if (total) reporter.progress({ id: 'restore', label: 'restoring objects', current: done, total, done: true });
      // 4. Prune last, most dependent kinds first.
      const pruneStart = performance.now();
      for (const p of writes.filter((x) => x.action.action === 'prune')) {
        if (interrupted) {
          p.action.outcome = 'failed';
          p.action.error = `not pruned: restore interrupted (${interrupted})`;
          continue;
        }
        try {
          await client.delete(p.type!, p.live!.metadata.namespace, p.live!.metadata.name);
          p.action.outcome = 'done';
          reporter.info('CNR_RESTORE_OBJECT', `pruned ${p.action.id}`, { id: p.action.id, action: 'prune' });
        } catch (err) {
          p.action.outcome = 'failed';
          p.action.error = errorMessage(err);
          reporter.error('CNR_RESTORE_OBJECT_FAILED', `${p.action.id}: prune failed: ${p.action.error}`);
        }
      }
      if (writes.some((x) => x.action.action === 'prune')) timer.add('prune', performance.now() - pruneStart);
    } finally {
      releaseProblems = await timer.time('guards', () => releaseAll(releases, reporter));
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
  }

  // 5. Re-read what was written: someone else (a controller, a person) may have changed it meanwhile.
  const readBack = writes
    .filter((p) => p.action.outcome === 'done' && p.action.action !== 'prune')
    .map((p) => ({ action: p.action, written: p.written, type: p.type, get desired() { return desiredOf(p); } }));
  const drifted = await timer.time('driftCheck', () => findDrift(client, resolver, readBack, concurrency, reporter));

  const failures = plan.actions
    .filter((a) => a.outcome === 'failed' || NOT_RESTORED.has(a.action))
    .map((a) => ({ id: a.id, action: a.action, reason: a.error ?? a.reason ?? 'failed' }));
  return {
    ...plan,
    counts: countActions(plan.actions),
    failures,
    drifted,
    guards: { paused, releaseProblems },
    ok: failures.length === 0 && drifted.length === 0 && releaseProblems.length === 0,
    timings: timer.result(),
  };
}

function pastTense(a: RestoreActionKind): string {
  return ({ create: 'created', update: 'updated', replace: 'replaced', prune: 'pruned' } as Record<string, string>)[a] ?? a;
}

/**
 * Plan, ask (unless dry run), execute. A dry run returns the plan with `ok` telling whether a real run
 * would restore everything; it writes nothing (server-side dry runs only).
 */
export async function restoreResources(client: KubeClient, bundle: RestoreSource, opts: RestoreOptions, reporter: Reporter): Promise<RestoreResult> {
  const timer = new PhaseTimer();
  const { plan, planned, bundleCrds } = await planRestore(client, bundle, opts, reporter, timer);
  if (opts.dryRun) {
    await timer.time('serverDryRun', () => serverDryRun(client, planned, opts.concurrency ?? DEFAULT_RESTORE_CONCURRENCY));
    const failures = plan.actions
      .filter((a) => NOT_RESTORED.has(a.action) || a.serverDryRunError)
      .map((a) => ({ id: a.id, action: a.action, reason: a.serverDryRunError ? `the API server would refuse it: ${a.serverDryRunError}` : a.reason ?? '' }));
    return { ...plan, failures, drifted: [], guards: { paused: [], releaseProblems: [] }, ok: failures.length === 0, timings: timer.result() };
  }
  const writes = plan.actions.filter((a) => WRITES.has(a.action)).length + plan.crdsToCreate.length;
  if (writes && opts.confirm && !(await timer.time('confirm', () => opts.confirm!(plan)))) {
    throw new RefusedError('restore not confirmed; nothing was written', { hint: 'answer y on a terminal, or pass --yes (see the preview with --dry-run)' });
  }
  return executeRestore(client, plan, planned, bundleCrds, opts, reporter, timer);
}
