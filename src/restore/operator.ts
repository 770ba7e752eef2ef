/**
 * Restore and a running tigera operator, judged by what the operator did:
 * - before anything is written, deletions in progress are allowed to finish. Deleting the Calico CRDs while the real
 *   operator runs leaves the Installation (and APIServer) Terminating on the operator's finalizers, and their CRDs
 *   with them: writing into them fails, and counting them as "unchanged" restores nothing while the operator tears
 *   Calico down. The operator removes its finalizers only once its teardown completes, and its reconcile needs the
 *   CRDs that are already gone (TigeraStatus, IP pools), so the missing ones are created first, then restore waits.
 *   Stripping the finalizers instead lets the garbage collector take calico-system with it.
 * - after the operator is resumed, restore waits for the operator's own reports: every TigeraStatus that was
 *   Available in the bundle is Available again, written by the resumed operator (the stale ones are deleted while
 *   it is paused), the Installation is not being deleted and calico-node is rendered.
 */
import { INSTALLATION, TIGERA_STATUS } from '../calico/detect.js';
import { CALICO_API_SERVICE, CALICO_CRD_GROUP, CALICO_NAMESPACES, OPERATOR_GROUP, OPERATOR_NAMESPACE, OPERATOR_DEPLOYMENT } from '../calico/knowledge.js';
import { leftoversUnknownTo } from '../calico/operator-generations.js';
import { operatorInstallCommands } from '../calico/release.js';
import { RefusedError } from '../core/errors.js';
import type { Reporter } from '../io/host.js';
import { K } from '../kube/builtin.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import { crdResourceType, listCrds } from '../kube/discovery.js';
import type { KubeObject } from '../kube/types.js';
import { isCalicoCrd } from './admission.js';
import { allocatesTo } from './ipam.js';
import { withoutUnused } from './ipam-merge.js';
import { readAddressUse, reportUse } from './ipam-use.js';
import { PRIOR_DATASTORE_READY_ANNOTATION } from './guards.js';
import { stripServerFields } from './normalize.js';
import { CLUSTER_INFORMATION, INSTALLATION_NAME } from './order.js';
import { calicoVersionOfOperatorImage } from './pools.js';
import { COLLECTOR_GRACE_MS, OrphanedNamespaces } from './orphaned-namespaces.js';
import type { PendingDeletions, RestoreAction, RestoreSource } from './types.js';

/** How long the operator may take to finish a teardown before restore gives up (it writes nothing meanwhile). */
export const DELETION_TIMEOUT_MS = 300_000;
/** How long the resumed operator may take to report its components Available again. */
export const OPERATOR_REPORT_TIMEOUT_MS = 600_000;

/** What a live object being deleted looks like in a plan's notes. */
export function deletionNote(live: KubeObject): string | undefined {
  if (!live.metadata.deletionTimestamp) return undefined;
  const f = live.metadata.finalizers ?? [];
  return `being deleted since ${live.metadata.deletionTimestamp}${f.length ? ` (held by finalizers ${f.join(', ')})` : ''}: restore waits until it is gone, then creates it`;
}

/** Calico CRDs and planned objects that are being deleted now. */
export function deletionsInProgress(liveCrds: KubeObject[], actions: RestoreAction[]): string[] {
  return [
    ...liveCrds.filter((c) => isCalicoCrd(c) && c.metadata.deletionTimestamp).map((c) => `CustomResourceDefinition ${c.metadata.name}`),
    ...actions.filter((a) => a.deleting).map((a) => a.id),
  ];
}

/** What is still being deleted, and the Calico namespaces among it whose owner is gone (names). */
async function stillDeleting(client: KubeClient): Promise<{ left: { what: string; finalizers: string[] }[]; orphaned: string[] }> {
  const out: { what: string; finalizers: string[] }[] = [];
  for (const crd of (await listCrds(client)).filter((c) => isCalicoCrd(c) && c.metadata.deletionTimestamp)) {
    out.push({ what: `CustomResourceDefinition ${crd.metadata.name}`, finalizers: crd.metadata.finalizers ?? [] });
    if (crd.spec.group !== OPERATOR_GROUP) continue;
    const t = crdResourceType(crd);
    for (const o of await client.listAll(t).catch(() => [] as KubeObject[]))
      if (o.metadata.finalizers?.length) out.push({ what: `${t.kind} ${o.metadata.name}`, finalizers: o.metadata.finalizers });
  }
  const namespaces = await calicoNamespaceDeletions(client);
  out.push(...namespaces.terminating, ...namespaces.awaitingCollection.map((what) => ({ what, finalizers: [] })));
  return { left: out, orphaned: namespaces.orphaned };
}

/**
 * A Calico namespace that can never finish deleting: the namespace controller must discover every API group before it
 * lets a namespace go, and Calico's aggregated API (APIService v3.projectcalico.org) is served from a Service in that
 * very namespace, already gone (status Available False, ServiceNotFound). Left alone the namespace stays Terminating for
 * ever (condition NamespaceDeletionDiscoveryFailure naming projectcalico.org/v3), and the operator cannot deploy the API
 * server into it again: seen after `kubectl delete -f tigera-operator.yaml` mid-teardown (node-side-night.test.ts).
 * The registration alone goes: it serves nothing, holds no data, and the operator registers it again with the API
 * server it deploys. Decided from the live objects only; any other state is left to the wait.
 */
export async function unregisterStaleCalicoApi(client: KubeClient, reporter: Reporter): Promise<void> {
  const api = await client.getOrUndefined(K.apiService, undefined, CALICO_API_SERVICE).catch(() => undefined);
  const backend: string | undefined = api?.spec?.service?.namespace;
  if (!api || !backend || !(CALICO_NAMESPACES as readonly string[]).includes(backend) || api.metadata.deletionTimestamp) return;
  const available = (api.status?.conditions ?? []).find((c: { type?: string }) => c.type === 'Available');
  if (available?.status !== 'False' || available.reason !== 'ServiceNotFound') return;
  const ns = await client.getOrUndefined(K.namespace, undefined, backend);
  const stuck = (ns?.status?.conditions ?? []).some(
    (c: { type?: string; status?: string; message?: string }) =>
      c.type === 'NamespaceDeletionDiscoveryFailure' && c.status === 'True' && String(c.message ?? '').includes('projectcalico.org/v3'),
  );
  if (!ns?.metadata.deletionTimestamp || !stuck) return;
  // Not allowed to (RBAC) or already gone: the wait goes on, and its refusal says what is left.
  if (
    !(await client.delete(K.apiService, undefined, CALICO_API_SERVICE).then(
      () => true,
      () => false,
    ))
  )
    return;
  reporter.warn(
    'CNR_RESTORE_STALE_API_SERVICE',
    `namespace ${backend} could not finish deleting: APIService ${CALICO_API_SERVICE} names its Service, which is gone; the registration was removed so the deletion completes (the tigera operator registers it again with the API server it deploys)`,
    { apiService: CALICO_API_SERVICE, namespace: backend },
  );
}

/** The operator's objects that own its namespaces: calico-system is the Installation's, calico-apiserver the APIServer's. */
const OPERATOR_OWNERS = [INSTALLATION, { ...INSTALLATION, plural: 'apiservers', kind: 'APIServer' }];

/**
 * The Calico namespaces on their way out, each read once: `terminating`, being deleted (the teardown deletes the
 * operator's namespaces last; objects restored into one still Terminating are refused), and `awaitingCollection`,
 * not deleted yet but owned by an Installation (or APIServer) that is gone or is another object of that name now.
 * The operator makes its namespaces dependents of those, so once the teardown lets the Installation go the garbage
 * collector deletes them a few seconds later: a restore that writes in between has its objects refused by the then
 * Terminating namespace (seen in restore-operator.test.ts).
 */
export async function calicoNamespaceDeletions(
  client: KubeClient,
): Promise<{ terminating: { what: string; finalizers: string[] }[]; awaitingCollection: string[]; orphaned: string[] }> {
  const terminating: { what: string; finalizers: string[] }[] = [];
  const awaitingCollection: string[] = [];
  const orphaned: string[] = [];
  for (const ns of CALICO_NAMESPACES) {
    const o = await client.getOrUndefined(K.namespace, undefined, ns);
    if (!o) continue;
    if (o.metadata.deletionTimestamp) {
      terminating.push({ what: `Namespace ${ns}`, finalizers: o.spec?.finalizers ?? [] });
      continue;
    }
    for (const ref of o.metadata.ownerReferences ?? []) {
      const type = OPERATOR_OWNERS.find((t) => t.kind === ref.kind);
      if (!type || !ref.apiVersion?.startsWith(`${OPERATOR_GROUP}/`)) continue;
      const owner = await client.getOrUndefined(type, undefined, ref.name).catch(() => undefined);
      if (owner?.metadata.uid === ref.uid) continue;
      awaitingCollection.push(`Namespace ${ns} (its owner ${ref.kind} ${ref.name} is gone)`);
      orphaned.push(ns);
      break;
    }
  }
  return { terminating, awaitingCollection, orphaned };
}

/** What to run so a teardown can finish when the operator is no longer installed (`operatorVersion`: the bundle's Calico release). */
export function reinstallOperatorHint(operatorVersion?: string): string {
  const how = operatorVersion ? `: ${operatorInstallCommands(operatorVersion).join(' && ')}` : " (the release's tigera-operator.yaml)";
  return `install the tigera operator again${how}; it finishes the teardown, then restore again`;
}

/**
 * Why a Calico namespace may outlive its owner, and the operator's finalizer with it: the collector's graph lost the
 * owner (Calico up to 3.27.4 shares a namespace's UID with its v3 Profile; 3.27.5 / 3.28.1 change it: doctor's
 * namespace-owner-gone, plan's v3-uids-change).
 */
const GC_LOST_OWNER =
  "on Calico up to 3.27.4, or after an upgrade or downgrade across 3.27.5 / 3.28.1, kube-controller-manager's collector may have lost the Calico namespaces' owner: `cni-rewind doctor` says so (namespace-owner-gone) and restarting kube-controller-manager ends it";

/**
 * Let deletions in progress finish: give the operator what its teardown needs (`prepare`: the bundle's CRDs the
 * cluster lacks, its ClusterInformation and pools, `writeTeardownNeeds`), then wait until no Calico CRD is Terminating
 * and no Calico namespace is left for the garbage collector. Nothing else is written. Refused (exit 5) when they do not
 * finish in time, and at once, with nothing written, when objects held by the operator's finalizers are being deleted
 * and the operator is not installed at all (`kubectl delete -f tigera-operator.yaml` deletes it with the CRDs): only
 * the operator removes its finalizers, so waiting could not help. What only awaits the garbage collector needs no
 * operator.
 */
export async function settleDeletions(
  client: KubeClient,
  pending: PendingDeletions,
  prepare: () => Promise<void>,
  reporter: Reporter,
  timeoutMs = DELETION_TIMEOUT_MS,
  operatorVersion?: string,
  collectorGraceMs = COLLECTOR_GRACE_MS,
): Promise<void> {
  const operator = await client.getOrUndefined(K.deployment, OPERATOR_NAMESPACE, OPERATOR_DEPLOYMENT);
  const heldByOperator = pending.deleting.length > 0;
  const all = pendingDeletionNames(pending);
  if (!operator && heldByOperator)
    throw new RefusedError(
      `being deleted: ${all}, held by the tigera operator's finalizers, and the operator is not installed (deployment ${OPERATOR_NAMESPACE}/${OPERATOR_DEPLOYMENT} is gone): nothing can finish the teardown; nothing was written`,
      { hint: reinstallOperatorHint(operatorVersion) },
    );
  const running = !!operator && (operator.spec?.replicas ?? 1) > 0;
  const finisher = !heldByOperator
    ? 'the garbage collector deletes it'
    : running
      ? 'the tigera operator finishes its teardown first'
      : 'the tigera operator is not running, nothing may remove its finalizers';
  reporter.warn('CNR_RESTORE_WAIT_DELETION', `being deleted: ${all}; ${finisher}: waiting (up to ${Math.round(timeoutMs / 1000)} s) before restoring`, {
    deleting: pending.deleting,
    awaitingCollection: pending.awaitingCollection,
  });
  await prepare();
  let left: { what: string; finalizers: string[] }[];
  const deadline = Date.now() + timeoutMs;
  const orphans = new OrphanedNamespaces(client, reporter, collectorGraceMs);
  for (;;) {
    const now = await stillDeleting(client);
    left = now.left;
    if (!left.length || Date.now() > deadline) break;
    await orphans.tick(now.orphaned);
    // Only a Calico namespace already Terminating can be stuck on the stale registration (two reads saved a second otherwise).
    if (left.some((l) => (CALICO_NAMESPACES as readonly string[]).some((ns) => l.what === `Namespace ${ns}`))) await unregisterStaleCalicoApi(client, reporter);
    await new Promise((r) => setTimeout(r, 1000));
  }
  if (left.length)
    throw new RefusedError(
      `still being deleted after ${Math.round(timeoutMs / 1000)} s: ${left.map((l) => `${l.what}${l.finalizers.length ? ` (finalizers ${l.finalizers.join(', ')})` : ''}`).join(', ')}; nothing but missing CRDs was written`,
      {
        hint: !heldByOperator
          ? `kube-controller-manager's garbage collector deletes objects whose owner is gone: check that it runs (${GC_LOST_OWNER}), then restore again`
          : running
            ? `the tigera operator removes its finalizers when its teardown completes: see its log (kubectl logs -n tigera-operator deploy/tigera-operator; ${GC_LOST_OWNER}), then restore again`
            : 'start the tigera operator (kubectl scale -n tigera-operator deploy/tigera-operator --replicas=1) so it can finish the teardown, then restore again',
      },
    );
}

/** Everything `pending` waits for, as one line: what is held by finalizers, then what awaits the garbage collector. */
export function pendingDeletionNames(pending: PendingDeletions): string {
  return [...pending.deleting, ...pending.awaitingCollection.map((n) => `${n}: the garbage collector deletes it`)].join(', ');
}

/**
 * Names of the TigeraStatus objects that were Available when the bundle was made: what the operator must report
 * again. `operatorImage` is the operator that will resume: an older generation never writes a newer one's reports
 * (the 3.27 operator has no `ippools`, the 3.29 one no `whisker` or `goldmane`), so those are not awaited.
 */
export function availableReports(statuses: KubeObject[], operatorImage?: string): string[] {
  const version = calicoVersionOfOperatorImage(operatorImage);
  const neverWritten = new Set(version ? leftoversUnknownTo(version).tigeraStatuses : []);
  return statuses
    .filter((s) => s.status?.conditions?.some((c: any) => c.type === 'Available' && c.status === 'True'))
    .map((s) => s.metadata.name)
    .filter((name) => !neverWritten.has(name))
    .sort();
}

/** While the operator is paused: its last reports go, so a report seen after it resumes is its own. */
export async function clearReports(client: KubeClient, names: string[]): Promise<void> {
  for (const name of names) await client.delete(TIGERA_STATUS, undefined, name).catch(() => undefined);
}

/**
 * After the operator resumed: wait for its own reports. Returns what was checked, and the problem when the operator
 * did not get there in time (the restore is then not ok: exit 3).
 */
export async function judgeOperator(
  client: KubeClient,
  reports: string[],
  expectInstallation: boolean,
  reporter: Reporter,
  timeoutMs = OPERATOR_REPORT_TIMEOUT_MS,
): Promise<{ checked: string[]; problem?: string }> {
  // An Installation this restore did not write (blocked, refused: reported as such already) and none in the cluster:
  // the operator renders nothing and reports nothing, so waiting would only delay the exit 3 that names it.
  if (!expectInstallation && !(await client.getOrUndefined(INSTALLATION, undefined, INSTALLATION_NAME).catch(() => undefined))) return { checked: [] };
  let missing: string[];
  const check = async (): Promise<string[]> => {
    const out: string[] = [];
    if (expectInstallation) {
      const inst = await client.getOrUndefined(INSTALLATION, undefined, INSTALLATION_NAME).catch(() => undefined);
      if (!inst) out.push('Installation default missing');
      else if (inst.metadata.deletionTimestamp) out.push('Installation default is being deleted');
    }
    for (const name of reports) {
      const ts = await client.getOrUndefined(TIGERA_STATUS, undefined, name).catch(() => undefined);
      const cond = (type: string) => ts?.status?.conditions?.find((c: any) => c.type === type)?.status;
      if (!ts) out.push(`TigeraStatus ${name} not reported yet`);
      else if (cond('Available') !== 'True' || cond('Degraded') === 'True' || cond('Progressing') === 'True')
        out.push(`TigeraStatus ${name}: Available ${cond('Available') ?? '-'}, Progressing ${cond('Progressing') ?? '-'}, Degraded ${cond('Degraded') ?? '-'}`);
    }
    if (reports.includes('calico') && !(await client.getOrUndefined(K.daemonSet, 'calico-system', 'calico-node'))) out.push('calico-node not rendered');
    return out;
  };
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    missing = await check();
    if (!missing.length || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 1000));
  }
  if (missing.length) {
    const problem = `the resumed tigera operator did not report Calico ready within ${Math.round(timeoutMs / 1000)} s: ${missing.join('; ')}`;
    reporter.error('CNR_RESTORE_OPERATOR_NOT_READY', problem);
    return { checked: [], problem };
  }
  const checked = [
    ...(expectInstallation ? ['Installation default not being deleted'] : []),
    ...reports.map((n) => `TigeraStatus ${n} Available (reported after the operator resumed)`),
    ...(reports.includes('calico') ? ['calico-node rendered'] : []),
  ];
  if (checked.length) reporter.info('CNR_RESTORE_OPERATOR_READY', `the resumed tigera operator reports: ${checked.join('; ')}`, { checked });
  return { checked };
}

/**
 * What a terminating operator needs to finish its teardown: v1.34 renders its teardown only once an enabled IP pool
 * exists ("waiting for enabled IP pools to be created") and never creates one while the Installation is terminating.
 * The bundle's ClusterInformation is created locked (datastoreReady false, the bundle's value recorded as the prior
 * one for the restore's own lock to release to), then the bundle's IPAM the cluster lacks (blocks, then the handles
 * and affinities of the blocks written here), then the pools the plan would write: calico-node's tunnel allocator
 * claims a block as soon as a pool exists, whatever the lock says, and must find the bundle's blocks already there.
 * The blocks are written without the allocations nothing uses now (ipam-use.ts: the teardown deleted the operator's
 * pods, a node's allocator may hold another address), and a handle only with an allocation in them.
 * Nothing that exists is written over (a 409 leaves it; the restore that follows merges it).
 */
export async function writeTeardownNeeds(client: KubeClient, bundle: RestoreSource, pools: Set<string>, reporter: Reporter): Promise<void> {
  const written: string[] = [];
  const create = async (o: KubeObject, plural: string, ipam = false): Promise<boolean> => {
    const t = { group: CALICO_CRD_GROUP, version: 'v1', plural, kind: o.kind, namespaced: false };
    try {
      await client.create(t, o);
      written.push(`${o.kind} ${o.metadata.name}`);
      return true;
    } catch (err) {
      // Exists (someone was first: never overwritten); an IPAM CRD still terminating: the restore writes it after.
      if (err instanceof KubeApiError && (err.conflict || (ipam && (err.notFound || err.statusCode === 405)))) return false;
      throw err;
    }
  };
  const objects = async (kind: string) => {
    const out: KubeObject[] = [];
    for await (const bo of bundle.objects({ groups: [CALICO_CRD_GROUP], kinds: [kind], lenient: true })) out.push(stripServerFields(bo.object));
    return out;
  };
  for (const o of await objects(CLUSTER_INFORMATION.kind)) {
    if (o.metadata.name !== CLUSTER_INFORMATION.name) continue;
    const prior = o.spec?.datastoreReady === false ? 'false' : 'true';
    const locked = {
      ...o,
      metadata: { ...o.metadata, annotations: { ...o.metadata.annotations, [PRIOR_DATASTORE_READY_ANNOTATION]: prior } },
      spec: { ...o.spec, datastoreReady: false },
    };
    await create(locked, 'clusterinformations');
  }
  const blocks = new Map<string, KubeObject>();
  const bundleBlocks = await objects('IPAMBlock');
  const use = bundleBlocks.length
    ? await readAddressUse(
        () => client.listAll(K.pod),
        () => client.listAll(K.node),
      )
    : undefined;
  for (const bundled of bundleBlocks) {
    const b = use ? withoutUnused(bundled, (attr, address) => use.use(attr, address) !== 'unused').block : bundled;
    if (!(await create(b, 'ipamblocks', true))) continue;
    blocks.set(b.spec?.cidr, b);
    // Counted only for the blocks written here: one that exists is merged by the restore that follows.
    if (use) withoutUnused(bundled, (attr, address) => use.keep(attr, address));
  }
  for (const h of await objects('IPAMHandle'))
    if (Object.keys(h.spec?.block ?? {}).some((c) => allocatesTo(blocks.get(c), h.spec?.handleID ?? h.metadata.name))) await create(h, 'ipamhandles', true);
  for (const a of await objects('BlockAffinity')) if (blocks.has(a.spec?.cidr)) await create(a, 'blockaffinities', true);
  for (const p of await objects('IPPool')) if (pools.has(p.metadata.name)) await create(p, 'ippools');
  if (use) reportUse(use, reporter);
  if (written.length)
    reporter.info('CNR_RESTORE_TEARDOWN_NEEDS', `written so the operator can finish its teardown: ${written.join(', ')} (datastore locked)`, { written });
}
