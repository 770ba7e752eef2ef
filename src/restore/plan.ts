/**
 * Planning a restore: read the bundle and the cluster, decide one RestoreAction per object (plan-object.ts),
 * write nothing. Two passes over the bundle, so the plan never holds the bundle's objects: the first reads and
 * checks every file (a corrupt one fails here, before anything is written) and keeps only what planning needs of
 * all of them (their keys, namespaces, groups, the Installation); the second plans object by object as it reads.
 */
import { performance } from 'node:perf_hooks';
import { CALICO_CRD_GROUP, OPERATOR_DEPLOYMENT, OPERATOR_GROUP, OPERATOR_NAMESPACE } from '../calico/knowledge.js';
import { crdRefusal } from '../calico/shipped-crds.js';
import { matchesKind } from '../bundle/reader.js';
import type { BundleManifest } from '../bundle/types.js';
import { BadInputError, RefusedError } from '../core/errors.js';
import type { Reporter } from '../io/host.js';
import { K } from '../kube/builtin.js';
import { clusterUid } from '../kube/cluster-uid.js';
import type { KubeClient } from '../kube/client.js';
import { listCrds } from '../kube/discovery.js';
import { ResourceResolver } from '../kube/resolver.js';
import { groupOf, objRef, type KubeObject } from '../kube/types.js';
import { admissionRefusal, isCalicoCrd, isReferenceOnlyConfig } from './admission.js';
import { INSTALLATION_KIND, INSTALLATION_NAME, NEVER_RESTORED_KINDS, RESTORED_CONFIG_KINDS, phaseOf } from './order.js';
import { availableReports, calicoNamespaceDeletions, deletionsInProgress } from './operator.js';
import { OwnerLookup, RENDERED_KINDS, renderedWithGoneOwners } from './owners.js';
import { LiveIndex, crdKey, ownerKey, planOne, planPrune } from './plan-object.js';
import { livePolicyNamingRelease, PolicyNaming } from './policy-naming.js';
import { stopEntriesOfStoppedPools } from './pools.js';
import { DesiredSpool } from './spool.js';
import { PlanTable, withActions } from './plan-table.js';
import { keepLiveIpam, refuseInstallationDeletingPools } from './plan-whole.js';
import { PhaseTimer } from './timings.js';
import {
  DEFAULT_RESTORE_CONCURRENCY,
  idOf,
  refOf,
  type ExistingPolicy,
  type Planned,
  type RestoreOptions,
  type RestorePlan,
  type RestoreSource,
} from './types.js';

/** What the first pass keeps of the bundle. */
interface BundleSummary {
  /**
   * ownerKey of every object restored that an ownerReference of the bundle names: what planning asks of it (is
   * this owner restored?). Not of every object, which would hold one key per object of a 100k-object bundle.
   */
  inBundle: Set<string>;
  /** `<group>\0<id>` of every object restored: what --prune keeps (collected only with --prune). */
  bundleIds: Set<string>;
  namespaces: Set<string>;
  haveNs: Set<string>;
  neededGroups: Set<string>;
  installation?: KubeObject;
  /** The bundle's disabled IPPools restore writes: their Installation entries are judged (pools.ts stopEntriesOfStoppedPools). */
  disabledPools: KubeObject[];
  count: number;
  /** The bundle's Calico CRDs. */
  crds: KubeObject[];
  /** Objects the bundle holds but restore never writes (not Calico's, or filed under another path): named, refused. */
  refused: Planned[];
}

export async function planRestore(
  client: KubeClient,
  bundle: RestoreSource,
  opts: RestoreOptions,
  reporter: Reporter,
  timer = new PhaseTimer(),
  spool?: DesiredSpool,
): Promise<{ plan: RestorePlan; planned: PlanTable; bundleCrds: Map<string, KubeObject> }> {
  const planStart = performance.now();
  const before = { readBundle: timer.spent('readBundle'), readCluster: timer.spent('readCluster'), schemaCheck: timer.spent('schemaCheck') };
  const existing = checkOptions(bundle.manifest, opts);
  const m = bundle.manifest;
  const { uid, sameCluster } = await checkCluster(client, m, opts, reporter, timer);

  const operatorImage = await timer.time('readCluster', () => operatorImageOf(client));
  // A policy is planned under the name the live release stores it by, from the first pass on (policy-naming.ts).
  const naming = new PolicyNaming(m.calico?.version, await timer.time('readCluster', () => livePolicyNamingRelease(client, operatorImage)));
  reporter.info('CNR_RESTORE_READ', `reading bundle ${m.id}`);
  const summary = await timer.time('readBundle', () => firstPass(bundle, opts, naming));
  const renamed = naming.summary();
  if (renamed) reporter.info('CNR_RESTORE_POLICY_NAMES', renamed);
  const liveCrdList = await timer.time('readCluster', () => listCrds(client));
  const liveCrds = new Map(liveCrdList.map((c) => [crdKey(c.spec.group, c.spec.names.kind), c]));
  refuseUnshippedCrds(summary, liveCrds, m.calico?.version);
  for (const r of summary.refused) reporter.warn('CNR_RESTORE_REFUSED_OBJECT', `${r.action.id}: ${r.action.reason}`);
  const bundleCrds = new Map(summary.crds.map((c) => [crdKey(c.spec.group, c.spec.names.kind), c]));
  const extraNs = namespacesNeeded(summary);

  const crdsToCreate = summary.crds.filter((c) => summary.neededGroups.has(c.spec.group) && !liveCrds.has(crdKey(c.spec.group, c.spec.names.kind)));

  // Planning creates no CRD, so a group-version found missing stays missing: ask discovery once, not per object.
  const resolver = new ResourceResolver(client, { cacheMissing: true });
  const ctx = {
    existing,
    liveCrds,
    bundleCrds,
    dropUnknownFields: !!opts.dropUnknownFields,
    // The Installation as restore writes it: pools are judged by the entries the operator will read.
    installation: summary.installation && stopEntriesOfStoppedPools(summary.installation, summary.disabledPools, operatorImage).installation,
    disabledPools: summary.disabledPools,
    operatorImage,
    inBundle: summary.inBundle,
    // The live lists planning compares with are kept as text in a spool of their own, gone once planned.
    liveIndex: new LiveIndex(client, timer, new DesiredSpool()),
    owners: new OwnerLookup(client, resolver),
    timer,
    spool,
  };
  // Rows of typed arrays for the entries with nothing to say, objects for the others (plan-table.ts).
  const planned = new PlanTable(spool);
  try {
    await poolStream(secondPass(bundle, opts, naming, timer, extraNs), opts.concurrency ?? DEFAULT_RESTORE_CONCURRENCY, async (obj) => {
      planned.add(await planOne(client, resolver, obj, ctx));
    });
  } finally {
    ctx.liveIndex.close();
  }
  // The bundle changed between the two passes (it is read twice): what was checked is not what was planned.
  if (planned.size !== summary.count + extraNs.length)
    throw new BadInputError(`bundle ${m.id} changed while it was read (${summary.count + extraNs.length} objects, then ${planned.size})`);
  await keepLiveIpam(client, resolver, bundle, planned, reporter, timer);
  // The bundle's own objects of the kinds the operator renders: those are planned already, not as rendered ones.
  const ids = new Set(planned.where((i) => RENDERED_KINDS.has(planned.headAt(i).kind)).map((i) => idOf(planned.refAt(i))));
  for (const p of await timer.time('readCluster', () => renderedWithGoneOwners(client, ctx.owners, ids))) planned.add(p);
  await timer.time('readCluster', () => refuseInstallationDeletingPools(client, planned, liveCrds, operatorImage));
  for (const p of summary.refused) planned.add(p);
  // Notes are said by entries kept as objects only (a row has none).
  for (const p of planned.kept())
    for (const n of p.action.notes ?? []) if (n.startsWith('ownerReferences')) reporter.warn('CNR_RESTORE_OWNER_DROPPED', `${p.action.id}: ${n}`);

  if (opts.prune)
    for (const p of await timer.time('readCluster', () => planPrune(client, resolver, bundle.manifest, summary.bundleIds, opts.kinds))) planned.add(p);
  planned.sort();

  const plan: RestorePlan = withActions(
    {
      bundle: { id: m.id, cluster: m.cluster, calicoVersion: m.calico?.version },
      cluster: { uid, sameCluster },
      dryRun: !!opts.dryRun,
      existing,
      crdsToCreate: crdsToCreate.map((c) => c.metadata.name).sort(),
      counts: planned.counts(),
      // Being deleted is a note, so such entries are kept as objects.
      deleting: deletionsInProgress(
        liveCrdList,
        planned.kept().map((p) => p.action),
      ),
      awaitingCollection: (await timer.time('readCluster', () => calicoNamespaceDeletions(client))).awaitingCollection,
      operatorReports: await timer.time('readBundle', () => bundleReports(bundle, operatorImage)),
    },
    planned,
  );
  // What planning spent that is not reading the bundle or the cluster or checking schemas: comparing, diffing, ordering.
  const spent = (k: keyof typeof before) => timer.spent(k) - before[k];
  timer.add('plan', Math.max(0, performance.now() - planStart - spent('readBundle') - spent('readCluster') - spent('schemaCheck')));
  return { plan, planned, bundleCrds };
}

/** --existing and --kinds, checked before anything is read. Returns the --existing policy. */
function checkOptions(m: BundleManifest, opts: RestoreOptions): ExistingPolicy {
  const existing = opts.existing ?? 'update';
  if (!['skip', 'update', 'replace'].includes(existing)) throw new BadInputError(`--existing must be skip, update or replace (got "${existing}")`);
  // A mistyped --kinds word must not turn into a restore of nothing that reports success.
  const configKind = (k: string) => [...RESTORED_CONFIG_KINDS].some((c) => [c.toLowerCase(), `${c.toLowerCase()}s`].includes(k.toLowerCase()));
  const unknownKinds = (opts.kinds ?? []).filter((k) => !configKind(k) && !m.resources.some((r) => matchesKind(r, [k])));
  if (unknownKinds.length)
    throw new BadInputError(`--kinds ${unknownKinds.join(', ')}: no such kind in bundle ${m.id}`, {
      hint: 'see the kinds it holds with: cni-rewind inspect BUNDLE',
    });
  return existing;
}

/** Refuses another cluster's bundle unless --allow-other-cluster. */
async function checkCluster(
  client: KubeClient,
  m: BundleManifest,
  opts: RestoreOptions,
  reporter: Reporter,
  timer: PhaseTimer,
): Promise<{ uid: string; sameCluster: boolean }> {
  const uid = await timer.time('readCluster', () => clusterUid(client));
  const sameCluster = !!m.cluster?.uid && m.cluster.uid === uid;
  if (!sameCluster && !opts.allowOtherCluster) {
    throw new RefusedError(
      `bundle ${m.id} was exported from cluster ${m.cluster?.name ?? '?'} (${m.cluster?.uid || 'no uid'}), not from this cluster (${uid})`,
      {
        hint: "restoring another cluster's IP pools and IPAM here can hand out addresses that are in use elsewhere; add --allow-other-cluster if this is really what you want",
      },
    );
  }
  if (!sameCluster)
    reporter.warn(
      'CNR_RESTORE_OTHER_CLUSTER',
      `restoring bundle of cluster ${m.cluster?.name} (${m.cluster?.uid}) into cluster ${uid} (--allow-other-cluster)`,
    );
  return { uid, sameCluster };
}

function matchesKinds(obj: KubeObject, kinds: string[] | undefined): boolean {
  if (!kinds?.length) return true;
  return kinds.some((k) => k.toLowerCase() === obj.kind.toLowerCase() || k.toLowerCase() === `${obj.kind.toLowerCase()}s`);
}

/** The bundle objects restore writes, in the order read, policies named for the live release; `refuse` hears of those it never writes. */
async function* restorable(
  bundle: RestoreSource,
  opts: RestoreOptions,
  naming: PolicyNaming,
  refuse?: (o: KubeObject, reason: string) => void,
): AsyncGenerator<KubeObject> {
  for await (const bo of bundle.objects({ ...(opts.kinds?.length ? { kinds: opts.kinds } : {}), lenient: true })) {
    if (opts.only && !opts.only.has(objRef(bo.object))) continue;
    const no = admissionRefusal(bo, 'resources');
    if (no) refuse?.(bo.object, no);
    else if (!NEVER_RESTORED_KINDS.has(bo.object.kind)) yield naming.named(bo.object);
  }
  for await (const bo of bundle.configObjects({ lenient: true })) {
    if (!matchesKinds(bo.object, opts.kinds) || (opts.only && !opts.only.has(objRef(bo.object))) || isReferenceOnlyConfig(bo)) continue;
    const no = admissionRefusal(bo, 'config');
    if (no) refuse?.(bo.object, no);
    else yield bo.object;
  }
}

async function firstPass(bundle: RestoreSource, opts: RestoreOptions, naming: PolicyNaming): Promise<BundleSummary> {
  const s: BundleSummary = {
    inBundle: new Set(),
    bundleIds: new Set(),
    namespaces: new Set(),
    haveNs: new Set(),
    neededGroups: new Set(),
    count: 0,
    crds: [],
    refused: [],
    disabledPools: [],
  };
  const refuse = (o: KubeObject, reason: string) => s.refused.push(refusedAction(o, reason));
  // Every object's key is needed only until the pass ends (an owner may come before or after what it owns).
  const all = new Set<string>();
  const referenced = new Set<string>();
  for await (const o of restorable(bundle, opts, naming, refuse)) {
    s.count++;
    all.add(ownerKey(o.apiVersion, o.kind, o.metadata.name, o.metadata.namespace));
    for (const r of o.metadata.ownerReferences ?? []) {
      referenced.add(ownerKey(r.apiVersion, r.kind, r.name, o.metadata.namespace));
      referenced.add(ownerKey(r.apiVersion, r.kind, r.name, undefined));
    }
    if (opts.prune) s.bundleIds.add(`${groupOf(o.apiVersion)}\0${idOf(o)}`);
    s.neededGroups.add(groupOf(o.apiVersion));
    if (o.metadata.namespace) s.namespaces.add(o.metadata.namespace);
    if (o.kind === 'Namespace') s.haveNs.add(o.metadata.name);
    if (o.kind === INSTALLATION_KIND && groupOf(o.apiVersion) === 'operator.tigera.io' && o.metadata.name === INSTALLATION_NAME) s.installation = o;
    if (o.kind === 'IPPool' && groupOf(o.apiVersion) === CALICO_CRD_GROUP && o.spec?.disabled === true) s.disabledPools.push(o);
  }
  for (const k of referenced) if (all.has(k)) s.inBundle.add(k);
  const crds = await bundle.crds();
  for (const c of crds) if (!isCalicoCrd(c)) refuse(c, `not restored: CustomResourceDefinition ${c.metadata.name} is not of a Calico group`);
  s.crds = crds.filter(isCalicoCrd);
  return s;
}

const refusedAction = (o: KubeObject, reason: string): Planned => ({
  action: { ref: refOf(o), id: idOf(o), phase: phaseOf(o).phase.id, action: 'refused', reason },
  rank: phaseOf(o).rank,
});

/**
 * A bundle CRD the cluster lacks is created as the bundle has it, so its non-schema part (a conversion webhook to
 * a URL of the bundle writer's choosing) must be a shipped release's: one that is not is refused, and the objects
 * of its kind then have no CRD to be written with.
 */
function refuseUnshippedCrds(s: BundleSummary, liveCrds: Map<string, KubeObject>, bundleVersion: string | undefined): void {
  s.crds = s.crds.filter((c) => {
    if (liveCrds.has(crdKey(c.spec.group, c.spec.names.kind)) || !s.neededGroups.has(c.spec.group)) return true;
    const why = crdRefusal(c, bundleVersion);
    if (why) s.refused.push(refusedAction(c, `not restored: CustomResourceDefinition ${c.metadata.name}: ${why}`));
    return !why;
  });
}

/** Namespaces the namespaced objects need (the bundle records objects, not their namespaces); added to `s`. */
function namespacesNeeded(s: BundleSummary): KubeObject[] {
  const extraNs: KubeObject[] = [...s.namespaces]
    .filter((ns) => !s.haveNs.has(ns))
    .map((ns) => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } }));
  for (const o of extraNs) {
    s.inBundle.add(ownerKey(o.apiVersion, o.kind, o.metadata.name, undefined));
    s.bundleIds.add(`\0${idOf(o)}`);
    s.neededGroups.add('');
  }
  return extraNs;
}

/** The second pass: its reading is timed as reading the bundle, the rest as planning. */
async function* secondPass(
  bundle: RestoreSource,
  opts: RestoreOptions,
  naming: PolicyNaming,
  timer: PhaseTimer,
  extraNs: KubeObject[],
): AsyncGenerator<KubeObject> {
  const it = restorable(bundle, opts, naming)[Symbol.asyncIterator]();
  for (;;) {
    const r = await timer.time('readBundle', () => it.next());
    if (r.done) break;
    yield r.value;
  }
  yield* extraNs;
}

/** TigeraStatus names Available in the bundle (they are never restored: the operator must write them again). */
async function bundleReports(bundle: RestoreSource, operatorImage: string | undefined): Promise<string[]> {
  const statuses: KubeObject[] = [];
  for await (const bo of bundle.objects({ groups: [OPERATOR_GROUP], kinds: ['TigeraStatus'], lenient: true })) statuses.push(bo.object);
  return availableReports(statuses, operatorImage);
}

async function operatorImageOf(client: KubeClient): Promise<string | undefined> {
  const operator = await client.getOrUndefined(K.deployment, OPERATOR_NAMESPACE, OPERATOR_DEPLOYMENT);
  const containers = operator?.spec?.template?.spec?.containers ?? [];
  return containers.find((c: any) => c.name === 'tigera-operator')?.image ?? containers[0]?.image;
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
