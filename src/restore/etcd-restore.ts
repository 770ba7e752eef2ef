/**
 * `restore --resources` of a Calico that keeps its data in etcd (calico-etcd.yaml), from a bundle exported from etcd
 * (src/export/etcd-export.ts), with the Kubernetes datastore's rules:
 * - IPAM is live state: a block, handle or affinity that exists is never overwritten; a missing one is created only
 *   if it is still missing at the write (an etcd transaction on the key's create revision);
 * - what Calico's programs write (Nodes, WorkloadEndpoints, Profiles, ClusterInformation, kube-controllers' `knp.`
 *   policies) is created when missing, never overwritten; a WorkloadEndpoint only while its pod exists;
 * - the user's config (pools, policies, BGP, Felix) that differs is put back as in the bundle, only if it has not
 *   changed since it was read (a transaction on its mod revision); a pool whose CIDR differs is refused by name;
 * - while IPAM is written the datastore is locked (ClusterInformation default `datastoreReady: false`, as Calico's
 *   own upgrade does): the CNI plugin and calico-node allocate nothing until it is released, in a `finally`;
 * - nothing is ever deleted. Which key an object goes to is built from Calico's table (calico/etcd-datastore.ts).
 */
import type { Bundle } from '../bundle/reader.js';
import { openCalicoEtcd, type EtcdAccessFlags } from '../calico/etcd-connection.js';
import {
  ETCD_IPAM_PREFIX,
  ETCD_IPAM_WORDS,
  ETCD_RESOURCES_PREFIX,
  etcdKindNamed,
  ipamRecordType,
  resourceKeyOf,
  roleOf,
  type EtcdKind,
} from '../calico/etcd-datastore.js';
import { planEtcdIpam, type PodExists } from './etcd-ipam.js';
import { pool } from '../util/pool.js';
import { BadInputError, RefusedError } from '../core/errors.js';
import type { EtcdGateway, EtcdKv } from '../etcd/gateway.js';
import type { Reporter } from '../io/host.js';
import { K } from '../kube/builtin.js';
import type { KubeClient } from '../kube/client.js';
import { clusterUid } from '../kube/cluster-uid.js';
import type { KubeObject } from '../kube/types.js';
import { ETCD_CLUSTER_INFORMATION_KEY, lockDatastore, type EtcdLock } from './etcd-lock.js';
import { PhaseTimer } from './timings.js';
import { DEFAULT_RESTORE_CONCURRENCY, type RestoreAction, type RestoreActionKind, type RestoreOptions, type RestorePlan, type RestoreResult } from './types.js';

export type EtcdRestoreSource = Pick<Bundle, 'manifest' | 'v3Objects' | 'etcdIpamRecords'>;

/** One key restore may write, with what it decided. */
interface EtcdEntry {
  action: RestoreAction;
  key: string;
  value: string;
  /** The live value's mod revision, for a replace. */
  modRevision?: string;
  ipam: boolean;
}

const IPAM_API = 'etcd.cni-rewind.io/v1';

/** The object as Calico would store it: without what the API server or etcd owns. */
function storable(obj: KubeObject): KubeObject {
  const { resourceVersion: _rv, managedFields: _mf, generation: _g, selfLink: _s, ...metadata } = obj.metadata as Record<string, unknown>;
  return { ...obj, metadata: metadata as KubeObject['metadata'] };
}

/** What restore compares: spec, labels and annotations (uid and timestamps are the store's). */
function comparable(obj: any): string {
  return JSON.stringify({ spec: obj?.spec ?? null, labels: obj?.metadata?.labels ?? {}, annotations: obj?.metadata?.annotations ?? {} });
}

function parse(value: Buffer): any {
  try {
    return JSON.parse(value.toString('utf8'));
  } catch {
    return undefined;
  }
}

function matchesFilter(kind: EtcdKind | undefined, kindName: string, id: string, opts: RestoreOptions): boolean {
  if (opts.only && !opts.only.has(id)) return false;
  return (
    !opts.kinds?.length ||
    etcdKindNamed(
      kind,
      kindName,
      opts.kinds.map((w) => w.toLowerCase()),
    )
  );
}

/** Every key under Calico's two prefixes, read page by page: the plan compares against this, not one request per key. */
async function readLive(etcd: EtcdGateway): Promise<Map<string, EtcdKv>> {
  const live = new Map<string, EtcdKv>();
  for (const prefix of [ETCD_RESOURCES_PREFIX, ETCD_IPAM_PREFIX])
    for await (const page of etcd.rangePrefix(prefix)) for (const kv of page.kvs) live.set(kv.key, kv);
  return live;
}

/** Whether a pod exists, from one list of the cluster's pods made when first asked (not one GET per allocation). */
function podLookup(client: KubeClient): PodExists {
  let names: Promise<Set<string>> | undefined;
  return async (namespace, pod) => {
    names ??= client.listAll(K.pod).then((pods) => new Set(pods.map((p) => `${p.metadata.namespace}/${p.metadata.name}`)));
    return (await names).has(`${namespace}/${pod}`);
  };
}

async function planEntries(client: KubeClient, etcd: EtcdGateway, bundle: EtcdRestoreSource, opts: RestoreOptions, duplicates: string[]): Promise<EtcdEntry[]> {
  const live = await readLive(etcd);
  const podExists = podLookup(client);
  const ipam: EtcdEntry[] = [];
  const pools: EtcdEntry[] = [];
  const rest: EtcdEntry[] = [];
  const act = (
    obj: { apiVersion: string; kind: string; namespace?: string; name: string },
    phase: string,
    action: RestoreActionKind,
    reason?: string,
  ): RestoreAction => ({
    ref: { apiVersion: obj.apiVersion, kind: obj.kind, ...(obj.namespace ? { namespace: obj.namespace } : {}), name: obj.name },
    id: `${obj.kind} ${obj.namespace ? `${obj.namespace}/` : ''}${obj.name}`,
    phase,
    action,
    ...(reason ? { reason } : {}),
  });

  const words = opts.kinds?.map((w) => w.toLowerCase());
  if (!words?.length || words.some((w) => ETCD_IPAM_WORDS.includes(w))) {
    const { decisions, duplicates: dups } = await planEtcdIpam(live, bundle.etcdIpamRecords(), podExists);
    duplicates.push(...dups);
    for (const d of decisions) {
      const ref = { apiVersion: IPAM_API, kind: `IPAM ${ipamRecordType(d.key) ?? 'record'}`, name: d.key };
      ipam.push({
        action: act(ref, 'ipam', d.action, d.action === 'unchanged' ? undefined : d.reason),
        key: d.key,
        value: d.value,
        ...(d.modRevision ? { modRevision: d.modRevision } : {}),
        ipam: true,
      });
    }
  }

  for await (const { object } of bundle.v3Objects()) {
    const at = resourceKeyOf(object);
    const ref = { apiVersion: object.apiVersion, kind: object.kind, namespace: object.metadata.namespace, name: object.metadata.name };
    const id = `${object.kind}/${object.metadata.namespace ?? ''}/${object.metadata.name}`;
    if (!matchesFilter(at?.kind, object.kind, id, opts)) continue;
    const list = object.kind === 'IPPool' ? pools : rest;
    if (!at) {
      list.push({
        action: act(ref, 'resources', 'unsupported', `${object.kind} is not a kind cni-rewind writes to Calico's etcd`),
        key: '',
        value: '',
        ipam: false,
      });
      continue;
    }
    const desired = storable(object);
    const value = JSON.stringify(desired);
    const now = live.get(at.key);
    const liveObj = now && parse(now.value);
    const role = roleOf(at.kind, object.metadata.name);
    let action: RestoreAction;
    if (!now) {
      const pod = desired.spec?.pod;
      const podGone =
        object.kind === 'WorkloadEndpoint' &&
        !(typeof pod === 'string' && pod && desired.metadata.namespace && (await podExists(desired.metadata.namespace, pod)));
      action = podGone
        ? act(ref, 'resources', 'skip', 'its pod is gone: the CNI plugin writes one for the pod that replaces it')
        : act(ref, 'resources', 'create');
    } else if (comparable(liveObj) === comparable(desired)) action = act(ref, 'resources', 'unchanged');
    else if (role === 'state') action = act(ref, 'resources', 'skip', "written by Calico's own programs: the live one is kept");
    else if (opts.existing === 'skip') action = act(ref, 'resources', 'skip', 'exists and differs (--existing skip)');
    else if (object.kind === 'IPPool' && liveObj?.spec?.cidr !== desired.spec?.cidr)
      action = {
        ...act(
          ref,
          'resources',
          'refused',
          `the live pool's CIDR is ${liveObj?.spec?.cidr}, the bundle's ${desired.spec?.cidr}: a pool's CIDR never changes in place`,
        ),
        fix: 'move the addresses to a new pool (calicoctl ipam), delete the live pool, then restore again',
      };
    else action = act(ref, 'resources', 'update');
    list.push({ action, key: at.key, value, ...(now && action.action === 'update' ? { modRevision: now.modRevision } : {}), ipam: false });
  }
  return [...ipam, ...pools, ...rest];
}

function countActions(entries: EtcdEntry[]): Partial<Record<RestoreActionKind, number>> {
  const counts: Partial<Record<RestoreActionKind, number>> = {};
  for (const e of entries) counts[e.action.action] = (counts[e.action.action] ?? 0) + 1;
  return counts;
}

/** The etcd-datastore restore: plan, confirm, lock if IPAM is written, write with transactions, read back. */
export async function restoreEtcd(
  client: KubeClient,
  bundle: EtcdRestoreSource,
  opts: RestoreOptions & { etcd?: EtcdAccessFlags },
  reporter: Reporter,
): Promise<RestoreResult> {
  const timer = new PhaseTimer();
  const m = bundle.manifest;
  if (m.datastore?.type !== 'etcd') {
    throw new RefusedError('this bundle was exported from the Kubernetes datastore, and Calico here keeps its data in etcd: nothing was restored', {
      hint: 'restore a bundle exported from this etcd-datastore Calico (cni-rewind export reads etcd)',
    });
  }
  if (opts.prune) {
    throw new BadInputError('--prune is not offered on the etcd datastore: restore there never deletes a key; nothing was restored', {
      hint: 'see what the cluster has beyond the bundle with: cni-rewind diff BUNDLE',
    });
  }
  const uid = await clusterUid(client);
  if (m.cluster.uid !== uid && !opts.allowOtherCluster) {
    throw new RefusedError(`this bundle is of cluster ${m.cluster.name} (${m.cluster.uid}), not this one (${uid}): nothing was restored`, {
      hint: 'pass --allow-other-cluster to restore it here',
    });
  }
  const { etcd } = await openCalicoEtcd(client, opts.etcd);
  // Bundle allocations whose address another handle holds now (a block Calico re-claimed after the loss).
  const duplicates: string[] = [];
  const entries = await timer.time('plan', () => planEntries(client, etcd, bundle, opts, duplicates));
  for (const d of duplicates) reporter.warn('CNR_RESTORE_ETCD_DUPLICATE_IP', d);
  const plan: RestorePlan = {
    bundle: { id: m.id, cluster: m.cluster, ...(m.calico.version ? { calicoVersion: m.calico.version } : {}) },
    cluster: { uid, sameCluster: m.cluster.uid === uid },
    dryRun: !!opts.dryRun,
    existing: opts.existing ?? 'update',
    crdsToCreate: [],
    actions: entries.map((e) => e.action),
    counts: countActions(entries),
    deleting: [],
    awaitingCollection: [],
    operatorReports: [],
  };
  const writes = entries.filter((e) => e.action.action === 'create' || e.action.action === 'update');
  const result = (drifted: RestoreResult['drifted'], releaseProblems: string[], paused: string[]): RestoreResult => {
    const failures = entries
      .filter((e) => ['blocked', 'refused', 'unsupported'].includes(e.action.action) || e.action.outcome === 'failed')
      .map((e) => ({ id: e.action.id, action: e.action.action, reason: e.action.error ?? e.action.reason ?? 'not restored' }));
    const timings = timer.result();
    return {
      ...plan,
      counts: countActions(entries),
      failures,
      drifted,
      guards: { paused, releaseProblems },
      ...(duplicates.length ? { ipamProblems: duplicates } : {}),
      ok: failures.length === 0 && drifted.length === 0 && releaseProblems.length === 0 && duplicates.length === 0,
      timings,
    };
  };
  if (opts.dryRun || writes.length === 0) return result([], [], []);
  if (opts.confirm && !(await timer.time('confirm', () => opts.confirm!(plan)))) {
    throw new RefusedError('restore not confirmed; nothing was written', { hint: 'answer y on a terminal, or pass --yes (see the preview with --dry-run)' });
  }
  let lock: (EtcdLock & { created?: boolean }) | undefined;
  const releaseProblems: string[] = [];
  try {
    const ci = writes.find((e) => e.key === ETCD_CLUSTER_INFORMATION_KEY && !e.modRevision);
    if (writes.some((e) => e.ipam)) lock = await timer.time('guards', () => lockDatastore(etcd, reporter, ci?.value));
    if (ci && lock?.created) ci.action.outcome = 'done';
    const write = async (e: EtcdEntry) => {
      if (opts.signal?.aborted || e.action.outcome) return;
      const ok = e.modRevision ? await etcd.replaceIfUnchanged(e.key, e.value, e.modRevision) : await etcd.createIfAbsent(e.key, e.value);
      e.action.outcome = ok ? 'done' : 'failed';
      if (!ok)
        e.action.error = e.modRevision
          ? 'changed in etcd after the plan read it; not overwritten'
          : 'created by someone else after the plan read it; not overwritten';
    };
    // IPAM first (the pools' addresses are held before a pool can allocate), each group with requests in flight at once.
    const concurrency = opts.concurrency ?? DEFAULT_RESTORE_CONCURRENCY;
    await timer.time('write', async () => {
      await pool(
        writes.filter((e) => e.ipam),
        concurrency,
        write,
      );
      await pool(
        writes.filter((e) => !e.ipam),
        concurrency,
        write,
      );
    });
  } finally {
    if (lock) {
      const problem = await timer.time('guards', () => lock!.release());
      if (problem) releaseProblems.push(problem);
    }
  }
  for (const e of writes) if (!e.action.outcome) e.action.outcome = 'failed';
  const drifted: RestoreResult['drifted'] = [];
  await timer.time('driftCheck', async () => {
    const readBack = await readLive(etcd);
    for (const e of writes.filter((w) => w.action.outcome === 'done')) {
      const now = readBack.get(e.key);
      const same = now && (e.ipam ? now.value.toString('utf8') === e.value : comparable(parse(now.value)) === comparable(JSON.parse(e.value)));
      if (!same) drifted.push({ id: e.action.id, paths: [now ? 'value' : '(deleted)'] });
    }
  });
  reporter.info('CNR_RESTORE_ETCD_DONE', `wrote ${writes.filter((w) => w.action.outcome === 'done').length} key(s) to Calico's etcd`);
  return result(drifted, releaseProblems, lock ? ['etcd ClusterInformation default datastoreReady'] : []);
}
