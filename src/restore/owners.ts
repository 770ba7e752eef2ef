/**
 * Live objects whose owners are gone, and the garbage collector.
 *
 * Deleting every Calico CRD under the running operator (the incident) deletes the Installation and the APIServer,
 * but not what they own: the calico-system Namespace, the operator's CA (tigera-operator/tigera-ca-private), its
 * certificates, ConfigMaps. Their ownerReferences then name an owner that no longer exists, of a kind nobody serves.
 * Kubernetes' garbage collector cannot judge such a reference and leaves the object alone; once the kind is served
 * again (restore creates the installations CRD from the bundle), it finds the owner missing and deletes the object,
 * a namespace with everything restored into it. Measured on the test cluster's kube-controller-manager: a ConfigMap
 * owned by an object of a deleted CRD survived 60 s, and was deleted 16 s after the CRD was created again. The
 * operator, resumed, then made a new CA and new certificates: what restore wrote no longer held.
 *
 * So restore takes such references off before it creates any CRD or writes anything (the collector has nothing to
 * act on), and once the owners are written links the objects to them again, with their new UIDs: the ownership is
 * the bundle's again, and what restore kept is not deleted after it.
 */
import { CALICO_NAMESPACES, OPERATOR_GROUP } from '../calico/knowledge.js';
import { errorMessage } from '../core/errors.js';
import type { Reporter } from '../io/host.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import { K } from '../kube/builtin.js';
import type { ResourceResolver } from '../kube/resolver.js';
import { groupOf, type KubeObject, type OwnerReference, type ResourceType } from '../kube/types.js';
import { desiredOf, idOf, type Planned } from './types.js';

/**
 * Owners by reference, each asked of the server once: restore's one place for "does this owner exist, with which
 * UID" (planning, writing, releasing, linking). An owner the restore writes is remembered with its new UID.
 */
export class OwnerLookup {
  private readonly uids = new Map<string, Promise<string | undefined>>();
  constructor(
    private readonly client: KubeClient,
    private readonly resolver: ResourceResolver,
  ) {}

  /** The live owner's UID, or undefined when there is none (its kind not served counts as none). */
  async uidOf(ref: OwnerReference, dependentNamespace: string | undefined): Promise<string | undefined> {
    const t = await this.resolver.resolve(ref.apiVersion, ref.kind);
    if (!t) return undefined;
    const namespace = t.namespaced ? dependentNamespace : undefined;
    const key = ownerCacheKey(t, namespace, ref.name);
    let p = this.uids.get(key);
    if (!p) this.uids.set(key, (p = this.client.getOrUndefined(t, namespace, ref.name).then((o) => o?.metadata.uid)));
    return p;
  }

  /** An object this restore wrote: an owner of others now, with this UID. */
  remember(type: ResourceType, written: KubeObject): void {
    const namespace = type.namespaced ? written.metadata.namespace : undefined;
    const key = ownerCacheKey(type, namespace, written.metadata.name);
    // Only what was asked for before (and may be cached as missing): an owner first asked for later is read then.
    // Remembering every written object would keep one entry per object of a 100k-object restore.
    if (this.uids.has(key)) this.uids.set(key, Promise.resolve(written.metadata.uid));
  }

  /**
   * The objects that name `live` as their owner (the garbage collector deletes them once it is gone), among the
   * objects the tigera operator renders in the Calico namespaces and their cluster RBAC, and the objects of `live`'s
   * own type. The API has no reverse index of ownerReferences, so each of those lists is read once per restore, at
   * the first object `--existing replace` would delete, not for every object.
   */
  async dependentsOf(live: KubeObject, type: ResourceType): Promise<string[]> {
    const uid = live.metadata.uid;
    if (!uid) return [];
    // Listed now, not reused from planning (renderedWithGoneOwners): restore has written since, and a dependent
    // missed here is an owner deleted under it.
    this.rendered ??= this.ownedBy(() => listRendered(this.client));
    const own = ownerCacheKey(type, undefined, '');
    let same = this.sameType.get(own);
    if (!same) this.sameType.set(own, (same = this.ownedBy(async () => (await this.client.listAll(type)).map((o) => [type, o] as [ResourceType, KubeObject]))));
    return [...new Set([...((await this.rendered).get(uid) ?? []), ...((await same).get(uid) ?? [])])];
  }

  private rendered?: Promise<Map<string, string[]>>;
  private readonly sameType = new Map<string, Promise<Map<string, string[]>>>();

  /** Owner UID -> the ids of the listed objects that name it. */
  private async ownedBy(list: () => Promise<[ResourceType, KubeObject][]>): Promise<Map<string, string[]>> {
    const out = new Map<string, string[]>();
    for (const [t, o] of await list())
      for (const r of o.metadata.ownerReferences ?? []) {
        const id = `${o.kind ?? t.kind} ${o.metadata.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata.name}`;
        out.set(r.uid, [...(out.get(r.uid) ?? []), id]);
      }
    return out;
  }

  /**
   * The owners of `live` that are gone, when every one of them is: then the garbage collector deletes it as soon as it
   * can judge the references. An object with one owner left only loses the dangling references (the collector's own
   * rule), so nothing is returned for it.
   */
  async goneOwners(live: KubeObject): Promise<OwnerReference[]> {
    const refs = live.metadata.ownerReferences ?? [];
    if (!refs.length) return [];
    for (const r of refs) if ((await this.uidOf(r, live.metadata.namespace)) === r.uid) return [];
    return refs;
  }
}

const ownerCacheKey = (t: ResourceType, namespace: string | undefined, name: string) => `${t.group}/${t.plural}/${namespace ?? ''}/${name}`;

export const ownerNames = (refs: OwnerReference[]): string => refs.map((r) => `${r.kind} ${r.name}`).join(', ');

/** The plan's note on an object whose owners are gone. */
export function goneOwnersNote(refs: OwnerReference[]): string {
  return (
    `owned by ${ownerNames(refs)}, which is gone: the garbage collector would delete it once it can judge the reference, ` +
    'so restore takes the reference off before writing anything and links it to the restored owner after'
  );
}

/**
 * Before any CRD is created: take the references to gone owners off the live objects the plan found with them.
 * An object the collector deleted meanwhile is created from the bundle instead (its action becomes create).
 * Returns the entries released, for `relinkOwners`.
 */
export async function releaseFromGoneOwners(
  client: KubeClient,
  resolver: ResourceResolver,
  lookup: OwnerLookup,
  planned: Planned[],
  reporter: Reporter,
): Promise<Planned[]> {
  const released: Planned[] = [];
  for (const p of planned) {
    if (!p.action.goneOwners?.length || !p.live) continue;
    const { namespace, name } = p.live.metadata;
    const type = (await resolver.forObject(p.live)) ?? p.type;
    if (!type) continue;
    let live: KubeObject | undefined = p.live;
    for (let attempt = 0; live; attempt++) {
      const gone = await lookup.goneOwners(live);
      if (!gone.length) break; // linked to a live owner meanwhile (the operator): nothing to take off
      try {
        // resourceVersion makes it conditional: a reference set meanwhile is never taken off unseen.
        await client.mergePatch(type, namespace, name, { metadata: { ownerReferences: null, resourceVersion: live.metadata.resourceVersion } });
        released.push(p);
        reporter.info('CNR_RESTORE_OWNER_RELEASED', `${p.action.id}: reference to ${ownerNames(gone)} (gone) taken off, so the garbage collector keeps it`, {
          id: p.action.id,
        });
        break;
      } catch (err) {
        if (err instanceof KubeApiError && err.notFound) live = undefined;
        else if (err instanceof KubeApiError && err.conflict && attempt < 4) live = await client.getOrUndefined(type, namespace, name);
        else throw err;
      }
    }
    if (!live) {
      // The collector was first: what it deleted is written from the bundle like any missing object.
      p.action.action = 'create';
      delete p.action.diff;
      delete p.live;
      (p.action.notes ??= []).push('deleted by the garbage collector before restore could keep it: created from the bundle');
    }
  }
  return released;
}

/**
 * After the writes: link the objects released from gone owners, and those written while their owner was not yet
 * restored (`ownerPending`), to the owners that exist now, with their current UIDs. References to owners still
 * missing stay off. Failures are reported, never thrown: the objects themselves are restored.
 */
export async function relinkOwners(
  client: KubeClient,
  resolver: ResourceResolver,
  lookup: OwnerLookup,
  entries: Planned[],
  reporter: Reporter,
): Promise<{ linked: string[]; problems: string[] }> {
  const linked: string[] = [];
  const problems: string[] = [];
  for (const p of entries) {
    const desired = desiredOf(p);
    const refs = desired.metadata.ownerReferences ?? [];
    const ns = desired.metadata.namespace;
    const now: OwnerReference[] = [];
    for (const r of refs) {
      const uid = await lookup.uidOf(r, ns);
      if (uid) now.push({ ...r, uid });
    }
    if (!now.length) continue;
    const type: ResourceType | undefined = (await resolver.forObject(desired)) ?? p.type;
    if (!type) continue;
    try {
      // References set meanwhile (the operator's, another owner's) stay; one naming the same owner is replaced.
      const live = await client.get(type, ns, desired.metadata.name);
      const same = (a: OwnerReference, b: OwnerReference) => a.kind === b.kind && a.name === b.name && groupOf(a.apiVersion) === groupOf(b.apiVersion);
      const others = (live.metadata.ownerReferences ?? []).filter((l) => !now.some((n) => same(l, n)));
      // One controller at most (the API server refuses two): ours yields to one set meanwhile.
      const mine = others.some((o) => o.controller) ? now.map((r) => ({ ...r, controller: false })) : now;
      const refs = [...others, ...mine];
      const written = await client.mergePatch<KubeObject>(type, ns, desired.metadata.name, {
        metadata: { ownerReferences: refs, resourceVersion: live.metadata.resourceVersion },
      });
      // The drift check compares with what was last sent.
      p.written = { ...(p.written ?? desired), metadata: { ...(p.written ?? desired).metadata, ownerReferences: refs } };
      linked.push(p.action.id);
      (p.action.notes ??= []).push(`linked to ${ownerNames(now)} (uid ${now.map((r) => r.uid).join(', ')}) once restored`);
      reporter.info('CNR_RESTORE_OWNER_LINKED', `${p.action.id}: linked to ${ownerNames(now)}`, { id: p.action.id, uid: written.metadata.uid });
    } catch (err) {
      const problem = `${p.action.id}: could not link it to ${ownerNames(now)}: ${errorMessage(err)}`;
      problems.push(problem);
      reporter.warn('CNR_RESTORE_OWNER_LINK_FAILED', problem);
    }
  }
  return { linked, problems };
}

/** Kinds the tigera operator renders and owns through its Installation or APIServer (calico-node and its friends). */
const RENDERED_TYPES: ResourceType[] = [K.daemonSet, K.deployment, K.service, K.serviceAccount, K.configMap, K.secret, K.role, K.roleBinding, K.pdb];
const RENDERED_CLUSTER_TYPES: ResourceType[] = [K.clusterRole, K.clusterRoleBinding];
/** Their kinds, to tell the bundle's own objects of those kinds in a plan. */
export const RENDERED_KINDS: ReadonlySet<string> = new Set([...RENDERED_TYPES, ...RENDERED_CLUSTER_TYPES].map((t) => t.kind));

/**
 * What the operator rendered (the calico-node DaemonSet, typha, kube-controllers, their accounts and RBAC) is in no
 * bundle, but its owner, the Installation, goes with the CRDs as the bundle's objects' owners do: once restore
 * serves the installations CRD again, the garbage collector would delete calico-node on every node. So these are
 * planned as the bundle's objects with gone owners are (`goneOwners`, nothing written to them): released before any
 * CRD is created, linked to the restored Installation after. `planned` ids are left out (the bundle's own).
 */
export async function renderedWithGoneOwners(client: KubeClient, lookup: OwnerLookup, planned: Set<string>): Promise<Planned[]> {
  const out: Planned[] = [];
  const consider = async (type: ResourceType, o: KubeObject) => {
    const owned = (o.metadata.ownerReferences ?? []).some((r) => groupOf(r.apiVersion) === OPERATOR_GROUP);
    const obj = { ...o, apiVersion: o.apiVersion ?? (type.group ? `${type.group}/${type.version}` : type.version), kind: o.kind ?? type.kind };
    const id = idOf(obj);
    if (!owned || planned.has(id) || o.metadata.deletionTimestamp) return;
    const gone = await lookup.goneOwners(obj);
    if (!gone.length) return;
    const ref = { apiVersion: obj.apiVersion, kind: obj.kind, ...(o.metadata.namespace ? { namespace: o.metadata.namespace } : {}), name: o.metadata.name };
    out.push({
      action: { ref, id, phase: 'other', action: 'unchanged', goneOwners: gone.map((r) => `${r.kind} ${r.name}`), notes: [goneOwnersNote(gone)] },
      desiredText: JSON.stringify({
        apiVersion: obj.apiVersion,
        kind: obj.kind,
        metadata: { name: o.metadata.name, namespace: o.metadata.namespace, ownerReferences: o.metadata.ownerReferences },
      }),
      live: obj,
      type,
      rank: Number.MAX_SAFE_INTEGER,
    });
  };
  for (const [type, o] of await listRendered(client)) await consider(type, o);
  return out;
}

/** Every object of the kinds the operator renders, in the Calico namespaces and cluster-wide (RBAC), with its type. */
async function listRendered(client: KubeClient): Promise<[ResourceType, KubeObject][]> {
  const out: [ResourceType, KubeObject][] = [];
  for (const ns of CALICO_NAMESPACES) for (const t of RENDERED_TYPES) for (const o of await client.listAll(t, { namespace: ns })) out.push([t, o]);
  for (const t of RENDERED_CLUSTER_TYPES) for (const o of await client.listAll(t)) out.push([t, o]);
  return out;
}
