/**
 * Planning one object of a restore: which RestoreAction it gets (create, update, unchanged, blocked, ...) and the
 * exact object a write would send. Also the live objects planning compares against and the --prune candidates.
 */
import { CALICO_CRD_GROUP, CALICO_GROUPS, OPERATOR_GROUP, SHARED_POLICY_GROUP } from '../calico/knowledge.js';
import {
  felixFieldsSetFromInstallationBy,
  installationFinalizersOf,
  isOperatorFinalizer,
  operatorFilledFelixFields,
  operatorFinalizersNotOf,
} from '../calico/operator-generations.js';
import { checkAgainstSchema, pruneUnknownFields } from '../calico/schema.js';
import type { BundleManifest } from '../bundle/types.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import { crdResourceType } from '../kube/discovery.js';
import type { ResourceResolver } from '../kube/resolver.js';
import { groupOf, type KubeObject, type ResourceType } from '../kube/types.js';
import { isIpamLive } from './ipam.js';
import { objectDiff, sameContent, stripServerFields } from './normalize.js';
import { INSTALLATION_KIND, NEVER_RESTORED_KINDS, RUNTIME_FIELDS, phaseOf } from './order.js';
import { deletionNote } from './operator.js';
import { goneOwnersNote, type OwnerLookup } from './owners.js';
import { calicoVersionOfOperatorImage, judgePool, stopEntriesOfStoppedPools } from './pools.js';
import { dependentsReason, updatedInPlaceNote, whyNotDeleted } from './replace.js';
import type { DesiredSpool } from './spool.js';
import type { PhaseTimer } from './timings.js';
import { idOf, refOf, type ExistingPolicy, type Planned, type RestoreAction } from './types.js';

export const crdKey = (group: string, kind: string) => `${group}\0${kind}`;
export const ownerKey = (apiVersion: string, kind: string, name: string, namespace: string | undefined) =>
  `${apiVersion}\0${kind}\0${namespace ?? ''}\0${name}`;

/** What planning one object needs to know of the whole restore. */
export interface PlanContext {
  existing: ExistingPolicy;
  liveCrds: Map<string, KubeObject>;
  bundleCrds: Map<string, KubeObject>;
  dropUnknownFields: boolean;
  installation?: KubeObject;
  /** The bundle's disabled IPPools restore writes (their Installation entries are stopped, pools.ts). */
  disabledPools?: readonly KubeObject[];
  operatorImage?: string;
  /** ownerKey of every object the bundle restores. */
  inBundle: Set<string>;
  liveIndex: LiveIndex;
  /** Live owners by reference: a live object whose owners are all gone is kept from the garbage collector. */
  owners: OwnerLookup;
  timer: PhaseTimer;
  /** Where the objects to write are kept (spool.ts); without one, in memory. */
  spool?: DesiredSpool;
}

export async function planOne(client: KubeClient, resolver: ResourceResolver, obj: KubeObject, ctx: PlanContext): Promise<Planned> {
  const { phase, rank } = phaseOf(obj);
  const action: RestoreAction = { ref: refOf(obj), id: idOf(obj), phase: phase.id, action: 'create' };
  const group = groupOf(obj.apiVersion);
  const liveCrd = ctx.liveCrds.get(crdKey(group, obj.kind));
  const crd = liveCrd ?? ctx.bundleCrds.get(crdKey(group, obj.kind));
  const type = await typeFor(resolver, obj, crd, liveCrd);
  if (!type) {
    return {
      action: { ...action, action: 'unsupported', reason: `the cluster does not serve ${obj.apiVersion} ${obj.kind} and the bundle has no CRD for it` },
      rank,
    };
  }

  const notes: string[] = [];
  let desired = stripServerFields(obj);
  if (crd) desired = checkSchema(desired, crd, !!liveCrd, action, notes, ctx);
  if (obj.kind === 'IPPool' && group === CALICO_CRD_GROUP) {
    const verdict = judgePool(desired, ctx.installation, ctx.operatorImage);
    if (verdict.refusal && action.action !== 'blocked') {
      action.action = 'refused';
      action.reason = verdict.refusal.reason;
      action.fix = verdict.refusal.fix;
    }
    if (verdict.note) notes.push(verdict.note);
  }
  if (obj.kind === INSTALLATION_KIND && group === OPERATOR_GROUP) {
    const stopped = stopEntriesOfStoppedPools(desired, ctx.disabledPools ?? [], ctx.operatorImage);
    desired = withRunningOperatorsFinalizers(stopped.installation, ctx.operatorImage, notes);
    notes.push(...stopped.notes);
  }
  await dropMissingOwners(ctx.owners, desired, ctx.inBundle, notes);
  if (notes.length) action.notes = notes;

  let live: KubeObject | undefined;
  if (liveCrd || !crd) live = await ctx.liveIndex.get(type, obj.metadata.namespace, obj.metadata.name);
  if (live) desired = keepRuntimeFields(desired, live);
  if (live && obj.kind === INSTALLATION_KIND && group === OPERATOR_GROUP) desired = withLiveOperatorFinalizers(desired, live, ctx.operatorImage);
  if (live && ctx.operatorImage) desired = keepOperatorFilledFelixFields(desired, live, calicoVersionOfOperatorImage(ctx.operatorImage));
  const deleting = live && deletionNote(live);
  if (deleting) {
    // Never "unchanged": it is about to be gone (the operator's teardown); a real run waits for that, then plans again.
    action.deleting = true;
    (action.notes ??= []).push(deleting);
  } else if (action.action === 'create') compareWithLive(action, live, desired, ctx.existing, obj.kind === 'Namespace' && group === '');
  if (action.action === 'replace' && live) keepDependents(action, await ctx.owners.dependentsOf(live, type));
  const gone = live?.metadata.ownerReferences?.length && !deleting ? await ctx.timer.time('readCluster', () => ctx.owners.goneOwners(live)) : [];
  if (gone.length) {
    action.goneOwners = gone.map((r) => `${r.kind} ${r.name}`);
    (action.notes ??= []).push(goneOwnersNote(gone));
  }
  // Text, not the object, and spooled to disk but for core objects (spool.ts): the plan of a large bundle holds every
  // entry until the restore ends. The live object is kept only where a write needs it (a replace's resourceVersion,
  // a dry run's check, references taken off); creates have none.
  const keepLive = live && (action.action !== 'unchanged' || gone.length);
  const text = JSON.stringify(desired);
  const slot = ctx.spool && group !== '' ? ctx.spool.put(text) : undefined;
  const where = slot ? { desiredAt: slot.offset, desiredBytes: slot.length, spool: ctx.spool } : { desiredText: text };
  return { action, ...where, ...(keepLive ? { live } : {}), type, rank };
}

/** The served type of the object, or the one its CRD from the bundle will serve once created. */
async function typeFor(
  resolver: ResourceResolver,
  obj: KubeObject,
  crd: KubeObject | undefined,
  liveCrd: KubeObject | undefined,
): Promise<ResourceType | undefined> {
  const served = await resolver.forObject(obj);
  if (served || !crd || liveCrd) return served;
  // One type per CRD and version, shared by its objects: a plan entry of each of 100k objects points to it.
  let byVersion = bundleCrdTypes.get(crd);
  if (!byVersion) bundleCrdTypes.set(crd, (byVersion = new Map()));
  if (byVersion.has(obj.apiVersion)) return byVersion.get(obj.apiVersion);
  const group = groupOf(obj.apiVersion);
  const t = crdResourceType(crd);
  const willServe = `${t.group}/${t.version}` === obj.apiVersion || crd.spec.versions?.some((v: any) => `${group}/${v.name}` === obj.apiVersion && v.served);
  const type = willServe ? { ...t, version: obj.apiVersion.split('/')[1]! } : undefined;
  byVersion.set(obj.apiVersion, type);
  return type;
}
const bundleCrdTypes = new WeakMap<KubeObject, Map<string, ResourceType | undefined>>();

/** Checks the object against its CRD's schema: blocks the action, or (--drop-unknown-fields) returns it pruned. */
function checkSchema(desired: KubeObject, crd: KubeObject, installed: boolean, action: RestoreAction, notes: string[], ctx: PlanContext): KubeObject {
  const findings = ctx.timer.sync('schemaCheck', () => checkAgainstSchema(desired, crd));
  if (!findings.length) return desired;
  action.findings = findings;
  const rejected = findings.filter((f) => f.kind === 'rejected');
  const pruned = findings.filter((f) => f.kind === 'pruned');
  const where = installed ? 'the CRD installed in the cluster' : 'the CRD from the bundle';
  if (rejected.length) {
    action.action = 'blocked';
    action.reason = `${where} rejects ${rejected.map((f) => `${f.path} (${f.detail})`).join('; ')}`;
    action.fix = "install CRDs that accept these values (e.g. plan/apply to the bundle's Calico version), then restore again";
    return desired;
  }
  if (!ctx.dropUnknownFields) {
    action.action = 'blocked';
    action.reason = `${where} does not know ${pruned.map((f) => f.path).join(', ')}: writing it would lose them`;
    action.fix = "restore with --drop-unknown-fields to write the object without these fields, or install the bundle's CRD version first";
    return desired;
  }
  notes.push(`written without ${pruned.map((f) => f.path).join(', ')} (unknown to the installed CRD; --drop-unknown-fields)`);
  return ctx.timer.sync('schemaCheck', () => pruneUnknownFields(desired, crd));
}

/**
 * Installation `default` with the bundle's operator finalizers cut to those the running operator's generation
 * defines (OPERATOR_GENERATIONS): a 3.30 bundle restored under the 3.29 operator would otherwise carry the whisker
 * and goldmane finalizers, which no running controller removes, so every later delete of the Installation would hang.
 * Finalizers of other tools stay. The restore never installs an operator (order.ts), so the live one is the one that
 * resumes; without one, or with an image tag of no known generation, none of the bundle's operator finalizers is
 * written (an operator puts its own back when it reconciles; a live object keeps its own, withLiveOperatorFinalizers).
 */
export function withRunningOperatorsFinalizers(desired: KubeObject, operatorImage: string | undefined, notes: string[]): KubeObject {
  const version = calicoVersionOfOperatorImage(operatorImage);
  const finalizers = desired.metadata.finalizers;
  if (!finalizers?.length) return desired;
  const foreign = operatorFinalizersNotOf(finalizers, version);
  if (!foreign.length) return desired;
  const who = version
    ? `the running operator (${operatorImage}) does not remove them`
    : operatorImage
      ? `the running operator (${operatorImage}) is of no known generation`
      : 'no tigera operator is installed to remove them';
  notes.push(`finalizers ${foreign.join(', ')} dropped: ${who}, so a delete would hang on them`);
  const kept = finalizers.filter((f) => !foreign.includes(f));
  // None left is as if the bundle had none: an update then keeps the live ones (write.ts withLiveMeta).
  const { finalizers: _all, ...metadata } = desired.metadata;
  return { ...desired, metadata: kept.length ? { ...metadata, finalizers: kept } : metadata };
}

/**
 * Installation `default` to update, with the running operator generation's finalizers the live object has, in the
 * live order: an older bundle (3.27's under the 3.29 operator) lacks them, and written without them they would be
 * put back once the operator resumes (drift in the read-back) and make every restore an update. Under an operator of
 * no known generation every live operator finalizer stays (restore never removes one it cannot judge). Without
 * finalizers in `desired` the update keeps the live ones anyway (write.ts withLiveMeta).
 */
function withLiveOperatorFinalizers(desired: KubeObject, live: KubeObject, operatorImage: string | undefined): KubeObject {
  const version = calicoVersionOfOperatorImage(operatorImage);
  const wanted = desired.metadata.finalizers;
  if (!wanted?.length) return desired;
  const own = new Set(version ? installationFinalizersOf(version) : []);
  const liveOnes = live.metadata.finalizers ?? [];
  const keep = (f: string) => wanted.includes(f) || (version ? own.has(f) : isOperatorFinalizer(f));
  const finalizers = [...liveOnes.filter(keep), ...wanted.filter((f) => !liveOnes.includes(f))];
  return { ...desired, metadata: { ...desired.metadata, finalizers } };
}

/**
 * Owners neither in the cluster nor in the bundle will not exist: drop those references now (in `desired`), so
 * the preview says so and an object restored before is not seen as changed on every run.
 */
async function dropMissingOwners(owners: OwnerLookup, desired: KubeObject, inBundle: Set<string>, notes: string[]): Promise<void> {
  const refs = desired.metadata.ownerReferences;
  if (!refs?.length) return;
  const kept = [];
  for (const r of refs) {
    const ns = desired.metadata.namespace;
    if (inBundle.has(ownerKey(r.apiVersion, r.kind, r.name, ns)) || inBundle.has(ownerKey(r.apiVersion, r.kind, r.name, undefined))) kept.push(r);
    else {
      if (await owners.uidOf(r, ns)) kept.push(r);
      else notes.push(`ownerReferences to ${r.kind} ${r.name} dropped: the owner is neither in the cluster nor in the bundle`);
    }
  }
  if (kept.length) desired.metadata.ownerReferences = kept;
  else delete desired.metadata.ownerReferences;
}

/** create, unchanged, skip, update or replace: what the live object and --existing make of a writable object. */
export function compareWithLive(
  action: RestoreAction,
  live: KubeObject | undefined,
  desired: KubeObject,
  existing: ExistingPolicy,
  alwaysUnchanged: boolean,
): void {
  if (!live) action.action = 'create';
  else if (sameContent(live, desired) || alwaysUnchanged) action.action = 'unchanged';
  else if (existing === 'skip') {
    action.action = 'skip';
    action.reason = 'exists and differs; --existing skip';
    action.diff = objectDiff(live, desired, action.id);
  } else {
    // Replace deletes first: never an object that finalizers or dependents hold (replace.ts); that one is updated.
    const kept = existing === 'replace' ? whyNotDeleted(live) : undefined;
    action.action = kept ? 'update' : existing;
    if (kept) (action.notes ??= []).push(updatedInPlaceNote(kept));
    action.diff = objectDiff(live, desired, action.id);
  }
}

/** A replace whose live object others name as their owner becomes an update in place (replace.ts). */
function keepDependents(action: RestoreAction, dependents: string[]): void {
  if (!dependents.length) return;
  action.action = 'update';
  (action.notes ??= []).push(updatedInPlaceNote(dependentsReason(dependents)));
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
 * FelixConfiguration `default` fields the running operator's generation (Calico `calicoVersion`) writes on its own
 * (OPERATOR_FILLED_FELIX_FIELDS, e.g. v1.34 writes bpfEnabled: false, healthPort, vxlanVNI; v1.40 also vxlanPort):
 * when the bundle leaves one unset, the live value is kept. Writing the bundle's object without it would only be
 * undone by the running operator seconds later, and would show as a change on every restore and as drift in the
 * read-back. A field only a newer generation writes (vxlanPort under the 3.30 operator) is the bundle's to decide.
 * A field the running generation sets from the Installation over any value keeps its live value even where the
 * bundle sets one (nftablesMode: a 3.31 bundle's Enabled, v1.42's Auto), for the same reason.
 */
export function keepOperatorFilledFelixFields(desired: KubeObject, live: KubeObject, calicoVersion: string | undefined): KubeObject {
  const filled = operatorFilledFelixFields(desired, live, calicoVersion);
  if (live.kind === 'FelixConfiguration' && live.metadata.name === 'default')
    for (const f of felixFieldsSetFromInstallationBy(calicoVersion)) if (live.spec?.[f] !== undefined && !filled.includes(f)) filled.push(f);
  if (!filled.length) return desired;
  const spec = { ...(desired.spec ?? {}) };
  for (const f of filled) spec[f] = live.spec[f];
  return { ...desired, spec };
}

/**
 * Live objects for planning: custom resources are listed once per type (paged) instead of one GET per object,
 * which matters for thousands of IPAM blocks and handles; core objects (a few ConfigMaps, Secrets, Namespaces)
 * are fetched one by one rather than listing every Secret of the cluster. With a spool, the listed objects are
 * kept there as text, a name's place in memory, and parsed again when asked for: a cluster that has the 100k
 * handles of the bundle already held every one parsed for the whole planning (350 MiB).
 */
export class LiveIndex {
  private readonly lists = new Map<string, Promise<Map<string, KubeObject | number>>>();
  /** Offset and length in the spool of each listed object, by the number its name maps to. */
  private readonly slots: number[] = [];
  constructor(
    private readonly client: KubeClient,
    private readonly timer: PhaseTimer,
    private readonly spool?: DesiredSpool,
  ) {}

  async get(type: ResourceType, namespace: string | undefined, name: string): Promise<KubeObject | undefined> {
    if (!type.group) return this.timer.time('readCluster', () => this.client.getOrUndefined(type, namespace, name));
    const key = `${type.group}/${type.version}/${type.plural}`;
    let list = this.lists.get(key);
    if (!list) {
      list = this.timer
        .time('readCluster', () => this.load(type))
        .catch((err) => {
          if (err instanceof KubeApiError && err.notFound) return new Map<string, KubeObject | number>();
          throw err;
        });
      this.lists.set(key, list);
    }
    const found = (await list).get(`${type.namespaced ? (namespace ?? '') : ''}/${name}`);
    if (typeof found !== 'number') return found;
    return JSON.parse(this.spool!.read(this.slots[2 * found]!, this.slots[2 * found + 1]!)) as KubeObject;
  }

  /** Removes the spool: the lists are not asked for after planning. */
  close(): void {
    this.spool?.close();
  }

  private async load(type: ResourceType): Promise<Map<string, KubeObject | number>> {
    const out = new Map<string, KubeObject | number>();
    for await (const o of this.client.listItems(type)) {
      const key = `${o.metadata.namespace ?? ''}/${o.metadata.name}`;
      if (!this.spool) {
        out.set(key, o);
        continue;
      }
      const slot = this.spool.put(JSON.stringify(o));
      out.set(key, this.slots.length / 2);
      this.slots.push(slot.offset, slot.length);
    }
    return out;
  }
}

/** Live objects of the bundle's Calico kinds that the bundle does not have. */
export async function planPrune(
  client: KubeClient,
  resolver: ResourceResolver,
  manifest: BundleManifest,
  inBundle: Set<string>,
  kinds?: string[],
): Promise<Planned[]> {
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
