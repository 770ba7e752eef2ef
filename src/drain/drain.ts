/**
 * Cordon, drain and uncordon nodes the way `kubectl drain` does, through the Eviction API so that
 * PodDisruptionBudgets are respected: an eviction a PDB refuses (HTTP 429) is retried until the drain timeout,
 * never turned into a delete. DaemonSet pods are skipped (they tolerate unschedulable and would come back),
 * mirror (static) pods cannot be evicted and are skipped too; finished pods are ignored.
 *
 * drainPreflight() finds, before anything is touched, what would make a drain hang or lose data:
 * PDBs that allow no disruption for pods on the nodes, and pods no controller would recreate.
 */
import { EnvironmentError, errorMessage } from '../core/errors.js';
import type { Reporter } from '../io/host.js';
import { K } from '../kube/builtin.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import { sleep } from '../util/retry.js';
import type { KubeObject } from '../kube/types.js';

export interface DrainOptions {
  timeoutMs: number;
  /** Delay between eviction retries while a PDB refuses (ms). */
  retryIntervalMs?: number;
}

export interface PodRef {
  namespace: string;
  name: string;
}

export interface BlockingPdb {
  namespace: string;
  name: string;
  disruptionsAllowed: number;
  /** Pods on the nodes to drain that this PDB covers. */
  pods: string[];
}

export interface DrainPreflight {
  /** Pods that would be evicted, per node. */
  evict: Record<string, string[]>;
  /** PDBs whose disruptionsAllowed is 0 for pods on these nodes: a drain would wait on them until it times out. */
  blockingPdbs: BlockingPdb[];
  /** Pods that no controller owns: eviction deletes them for good. */
  unmanagedPods: string[];
  /** Pods with emptyDir volumes (their data is lost on eviction; informational). */
  localStoragePods: string[];
  ok: boolean;
}

const key = (p: KubeObject) => `${p.metadata.namespace}/${p.metadata.name}`;

export async function cordon(client: KubeClient, node: string): Promise<void> {
  await client.mergePatch(K.node, undefined, node, { spec: { unschedulable: true } });
}

export async function uncordon(client: KubeClient, node: string): Promise<void> {
  await client.mergePatch(K.node, undefined, node, { spec: { unschedulable: null } });
}

export function isNodeReady(n: KubeObject | undefined): boolean {
  return !!n?.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True');
}

export async function waitNodeReady(client: KubeClient, node: string, timeoutMs: number): Promise<void> {
  await client.waitFor(`node ${node} to be Ready`, async () => (isNodeReady(await client.getOrUndefined(K.node, undefined, node)) ? true : undefined), {
    timeoutMs,
    intervalMs: 1000,
  });
}

function isDaemonSetPod(p: KubeObject): boolean {
  return !!p.metadata.ownerReferences?.some((o) => o.kind === 'DaemonSet' && o.controller);
}
function isMirrorPod(p: KubeObject): boolean {
  return !!p.metadata.annotations?.['kubernetes.io/config.mirror'];
}
function isFinished(p: KubeObject): boolean {
  return p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed';
}

/** Pods a drain of `node` evicts. */
export async function podsToEvict(client: KubeClient, node: string): Promise<KubeObject[]> {
  const pods = await client.listAll(K.pod, { fieldSelector: `spec.nodeName=${node}` });
  return pods.filter((p) => !isDaemonSetPod(p) && !isMirrorPod(p) && !isFinished(p) && !p.metadata.deletionTimestamp);
}

/** Kubernetes label selector semantics (matchLabels + matchExpressions); `{}` matches everything. */
export function selectorMatches(selector: any, labels: Record<string, string>): boolean {
  if (!selector) return false;
  for (const [k, v] of Object.entries((selector.matchLabels ?? {}) as Record<string, string>)) if (labels[k] !== v) return false;
  for (const e of (selector.matchExpressions ?? []) as { key: string; operator: string; values?: string[] }[]) {
    const has = Object.hasOwn(labels, e.key);
    const val = labels[e.key];
    switch (e.operator) {
      case 'In':
        if (!has || !e.values?.includes(val!)) return false;
        break;
      case 'NotIn':
        if (has && e.values?.includes(val!)) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}

export async function drainPreflight(client: KubeClient, nodes: string[]): Promise<DrainPreflight> {
  const pdbs = await client.listAll(K.pdb);
  const evict: Record<string, string[]> = {};
  const blocking = new Map<string, BlockingPdb>();
  const unmanaged: string[] = [];
  const localStorage: string[] = [];
  for (const node of nodes) {
    const pods = await podsToEvict(client, node);
    evict[node] = pods.map(key);
    for (const p of pods) {
      if (!p.metadata.ownerReferences?.some((o) => o.controller)) unmanaged.push(key(p));
      if ((p.spec?.volumes ?? []).some((v: any) => v.emptyDir)) localStorage.push(key(p));
      for (const pdb of pdbs) {
        if (pdb.metadata.namespace !== p.metadata.namespace) continue;
        if (!selectorMatches(pdb.spec?.selector, p.metadata.labels ?? {})) continue;
        const allowed = Number(pdb.status?.disruptionsAllowed ?? 0);
        if (allowed > 0) continue;
        const k = key(pdb);
        const b = blocking.get(k) ?? { namespace: pdb.metadata.namespace!, name: pdb.metadata.name, disruptionsAllowed: allowed, pods: [] };
        b.pods.push(key(p));
        blocking.set(k, b);
      }
    }
  }
  const blockingPdbs = [...blocking.values()];
  return { evict, blockingPdbs, unmanagedPods: unmanaged, localStoragePods: localStorage, ok: blockingPdbs.length === 0 && unmanaged.length === 0 };
}

/** One human line per preflight problem. */
export function describePreflight(p: DrainPreflight): string[] {
  return [
    ...p.blockingPdbs.map((b) => `PodDisruptionBudget ${b.namespace}/${b.name} allows ${b.disruptionsAllowed} disruption(s); it covers ${b.pods.join(', ')}`),
    ...p.unmanagedPods.map((u) => `pod ${u} has no controller: evicting it deletes it for good`),
  ];
}

type EvictOutcome = 'evicted' | 'gone' | 'blocked';

async function evict(client: KubeClient, p: KubeObject): Promise<{ outcome: EvictOutcome; message?: string }> {
  const ns = p.metadata.namespace!;
  const name = p.metadata.name;
  try {
    await client.request('POST', `/api/v1/namespaces/${encodeURIComponent(ns)}/pods/${encodeURIComponent(name)}/eviction`, {
      body: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name, namespace: ns } },
      // 429 here is a PDB saying "not now", not API throttling: the drain loop decides when to retry.
      retry: false,
    });
    return { outcome: 'evicted' };
  } catch (err) {
    if (err instanceof KubeApiError && err.notFound) return { outcome: 'gone' };
    if (err instanceof KubeApiError && err.statusCode === 429) return { outcome: 'blocked', message: err.message };
    throw err;
  }
}

/**
 * Evict every pod of a cordoned node, waiting for PDBs to allow it, then wait until the pods are gone.
 * Throws (naming the pods left and why) when the timeout passes; never deletes a pod a PDB protects.
 */
export async function drainNode(client: KubeClient, node: string, opts: DrainOptions, reporter: Reporter): Promise<{ evicted: string[] }> {
  const deadline = Date.now() + opts.timeoutMs;
  const interval = opts.retryIntervalMs ?? 2000;
  let pending = await podsToEvict(client, node);
  const total = pending.length;
  const evicted: { ref: string; uid?: string; ns: string; name: string }[] = [];
  const blockedBy = new Map<string, string>();
  reporter.info('CNR_DRAIN_START', `draining node ${node}: ${total} pod(s) to evict`, { node, pods: pending.map(key) });
  while (pending.length) {
    const still: KubeObject[] = [];
    for (const p of pending) {
      const r = await evict(client, p);
      if (r.outcome === 'blocked') {
        still.push(p);
        if (!blockedBy.has(key(p))) reporter.warn('CNR_DRAIN_BLOCKED', `eviction of ${key(p)} refused, retrying: ${r.message}`, { node, pod: key(p) });
        blockedBy.set(key(p), r.message ?? 'refused');
      } else {
        evicted.push({ ref: key(p), uid: p.metadata.uid, ns: p.metadata.namespace!, name: p.metadata.name });
        blockedBy.delete(key(p));
      }
    }
    reporter.progress({
      id: `drain:${node}`,
      label: `drain ${node}`,
      current: evicted.length,
      total,
      status: still.length ? `${still.length} waiting on a PodDisruptionBudget` : 'evicted',
    });
    pending = still;
    if (!pending.length) break;
    if (Date.now() > deadline) {
      throw new EnvironmentError(
        `drain of node ${node} timed out after ${Math.round(opts.timeoutMs / 1000)} s: ${pending.length} pod(s) could not be evicted: ${pending.map((p) => `${key(p)} (${blockedBy.get(key(p))})`).join('; ')}`,
        { hint: 'the PodDisruptionBudget(s) allow no disruption; scale the workload or fix the PDB, or raise --drain-timeout. The node is left cordoned.' },
      );
    }
    await sleep(interval);
  }
  // Evicted pods terminate gracefully; the node is drained when they are gone (or replaced by a new pod of that name).
  for (const e of evicted) {
    await client
      .waitFor(
        `pod ${e.ref} to terminate`,
        async () => {
          const cur = await client.getOrUndefined(K.pod, e.ns, e.name);
          return !cur || cur.metadata.uid !== e.uid || cur.spec?.nodeName !== node ? true : undefined;
        },
        { timeoutMs: Math.max(5000, deadline - Date.now()), intervalMs: 500 },
      )
      .catch((err) => {
        throw new EnvironmentError(`drain of node ${node}: pod ${e.ref} did not terminate: ${errorMessage(err)}`);
      });
  }
  reporter.progress({ id: `drain:${node}`, label: `drain ${node}`, current: evicted.length, total, status: 'drained', done: true });
  return { evicted: evicted.map((e) => e.ref) };
}
