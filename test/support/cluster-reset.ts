/**
 * A worker's cluster is reused by the next end-to-end file that runs in its slot, after this reset: everything a
 * file can have created that a freshly started cluster does not have is deleted (Calico's supervisor stopped first,
 * so no program of the previous file acts meanwhile). What "fresh" means is recorded right after the cluster
 * started (the baseline): namespaces, CRDs, nodes, cluster RBAC, APIServices, webhooks, PriorityClasses, and in
 * the namespaces a fresh cluster has, the kinds tests create there. test/e2e/cluster-reset.test.ts checks it.
 */
import { existsSync, readFileSync, writeFileSync, renameSync } from 'node:fs';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import { crdResourceType } from '../../src/kube/discovery.js';
import type { KubeObject, ResourceType } from '../../src/kube/types.js';
import { pool } from '../../src/util/pool.js';

const t = (group: string, version: string, plural: string, kind: string, namespaced: boolean): ResourceType => ({ group, version, plural, kind, namespaced });

/** Cluster-scoped kinds a test may create. Namespaces go last: what is in them goes with them. */
const CLUSTER_KINDS: ResourceType[] = [
  K.crd,
  K.node,
  K.clusterRole,
  K.clusterRoleBinding,
  t('apiregistration.k8s.io', 'v1', 'apiservices', 'APIService', false),
  t('admissionregistration.k8s.io', 'v1', 'validatingwebhookconfigurations', 'ValidatingWebhookConfiguration', false),
  t('admissionregistration.k8s.io', 'v1', 'mutatingwebhookconfigurations', 'MutatingWebhookConfiguration', false),
  t('scheduling.k8s.io', 'v1', 'priorityclasses', 'PriorityClass', false),
  t('', 'v1', 'persistentvolumes', 'PersistentVolume', false),
  K.namespace,
];

/** Kinds tests create inside the namespaces a fresh cluster has (kube-system: calico.yaml's objects, the lock lease). */
const NAMESPACED_KINDS: ResourceType[] = [
  K.daemonSet,
  K.deployment,
  K.replicaSet,
  K.pod,
  K.pdb,
  K.service,
  K.configMap,
  K.secret,
  K.serviceAccount,
  K.role,
  K.roleBinding,
  K.lease,
  t('', 'v1', 'persistentvolumeclaims', 'PersistentVolumeClaim', true),
];

/** The names of everything a fresh cluster has, per kind (`plural.group`, and `ns/name` for namespaced kinds). */
export type Baseline = Record<string, string[]>;
/** Objects beyond the baseline: per kind, name -> UID. */
export type Leftovers = Record<string, Record<string, string>>;

const key = (r: ResourceType) => `${r.plural}.${r.group || 'core'}`;

/**
 * Objects the control plane itself creates and keeps (each namespace's default ServiceAccount and root CA, the API
 * server's identity leases, node leases owned by their nodes): never a file's leftovers.
 */
const SYSTEM_MANAGED = /^(.+\/default|.+\/kube-root-ca\.crt|kube-system\/apiserver-.+|kube-node-lease\/.+)$/;

async function objects(client: KubeClient): Promise<Leftovers> {
  const out: Leftovers = {};
  const uids = (list: KubeObject[], prefix = '') => Object.fromEntries(list.map((o) => [`${prefix}${o.metadata.name}`, o.metadata.uid ?? '']));
  for (const r of CLUSTER_KINDS) out[key(r)] = uids(await client.listAll(r));
  const namespaces = Object.keys(out[key(K.namespace)]!);
  for (const r of NAMESPACED_KINDS) {
    out[key(r)] = {};
    for (const ns of namespaces) Object.assign(out[key(r)]!, uids(await client.listAll(r, { namespace: ns }), `${ns}/`));
  }
  return out;
}

/** Record what the freshly started cluster has (before any test file ran on it). */
export async function recordBaseline(client: KubeClient, file: string): Promise<void> {
  const now = await objects(client);
  const b: Baseline = Object.fromEntries(Object.entries(now).map(([k, v]) => [k, Object.keys(v).sort()]));
  writeFileSync(`${file}.tmp`, JSON.stringify(b, null, 1));
  renameSync(`${file}.tmp`, file);
}

export function readBaseline(file: string): Baseline | undefined {
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Baseline) : undefined;
}

/** What the cluster has now beyond the baseline, per kind (empty when nothing is left). */
export async function leftovers(client: KubeClient, baseline: Baseline): Promise<Leftovers> {
  const out: Leftovers = {};
  for (const [k, byName] of Object.entries(await objects(client))) {
    const base = new Set(baseline[k] ?? []);
    const extra = Object.entries(byName).filter(([n]) => !base.has(n) && !SYSTEM_MANAGED.test(n));
    if (extra.length) out[k] = Object.fromEntries(extra);
  }
  return out;
}

/**
 * Deletes everything beyond the baseline and waits until each deleted object is gone (one a controller re-creates
 * has a new UID and is not waited for). Finalizers of objects whose controllers are not running any more (the tigera
 * operator's) are taken off, or nothing would finish. Returns what it deleted.
 */
// 600 s: a CRD the previous file filled (kubeconfig.test.ts writes 20,000 objects) goes only once the API server has
// deleted every object of it, which took over 180 s in a fresh-clone rehearsal on a loaded 2-core machine (2026-12-07,
// path-matrix-d failed there waiting for ipamhandles.crd.projectcalico.org). Waiting longer costs nothing when it is fast.
export async function resetToBaseline(client: KubeClient, baseline: Baseline, timeoutMs = 600_000): Promise<Leftovers> {
  const extra = await leftovers(client, baseline);
  if (!Object.keys(extra).length) return extra;
  await clearFinalizersOfCustomObjects(client);
  await forceDeletePods(client, baseline);
  for (const r of [...NAMESPACED_KINDS, ...CLUSTER_KINDS]) {
    await pool(Object.keys(extra[key(r)] ?? {}), 8, async (n) => {
      const [ns, name] = r.namespaced ? n.split('/') : [undefined, n];
      await dropFinalizers(client, r, ns, name!);
      await client.delete(r, ns, name!);
    });
  }
  const stillThere = async (): Promise<Leftovers> => {
    const now = await leftovers(client, baseline);
    const out: Leftovers = {};
    for (const [k, byName] of Object.entries(now)) {
      const same = Object.entries(byName).filter(([n, uid]) => extra[k]?.[n] === uid);
      if (same.length) out[k] = Object.fromEntries(same);
    }
    return out;
  };
  await client
    .waitFor(
      'the objects the previous test file left to be deleted',
      async () => {
        const left = await stillThere();
        if (!Object.keys(left).length) return true;
        // Objects that got finalizers after the first pass (a namespace's content being terminated), and pods a
        // controller created meanwhile.
        for (const ns of Object.keys(left[key(K.namespace)] ?? {})) await dropFinalizersInNamespace(client, ns);
        await forceDeletePods(client, baseline);
        return undefined;
      },
      { timeoutMs, intervalMs: 500 },
    )
    .catch(async (err) => {
      throw new Error(`${err instanceof Error ? err.message : String(err)}; still there: ${JSON.stringify(await stillThere())}`);
    });
  return extra;
}

/**
 * Pods go at once (grace period 0): a kwok pod waits for its fake kubelet to confirm the deletion, and one whose node
 * was deleted first waits for the pod garbage collector's 40 s quarantine; either keeps its namespace Terminating.
 */
async function forceDeletePods(client: KubeClient, baseline: Baseline): Promise<void> {
  const base = new Set(baseline[key(K.pod)] ?? []);
  const pods = (await client.listAll(K.pod)).filter((p) => !base.has(`${p.metadata.namespace}/${p.metadata.name}`));
  await pool(pods, 8, async (p) => {
    await dropFinalizers(client, K.pod, p.metadata.namespace, p.metadata.name);
    await client.delete(K.pod, p.metadata.namespace, p.metadata.name, { gracePeriodSeconds: 0 });
  });
}

async function dropFinalizers(client: KubeClient, r: ResourceType, ns: string | undefined, name: string): Promise<void> {
  const o = await client.getOrUndefined<KubeObject>(r, ns, name);
  if (o?.metadata.finalizers?.length) await client.mergePatch(r, ns, name, { metadata: { finalizers: null } }).catch(() => undefined);
}

async function dropFinalizersInNamespace(client: KubeClient, ns: string): Promise<void> {
  for (const r of NAMESPACED_KINDS) {
    for (const o of await client.listAll(r, { namespace: ns }).catch(() => [] as KubeObject[]))
      if (o.metadata.finalizers?.length) await dropFinalizers(client, r, ns, o.metadata.name);
  }
}

/** Custom objects (an Installation, a TigeraStatus) keep a CRD Terminating while they hold finalizers. */
async function clearFinalizersOfCustomObjects(client: KubeClient): Promise<void> {
  for (const crd of await client.listAll(K.crd)) {
    const r = crdResourceType(crd);
    for (const o of await client.listAll(r).catch(() => [] as KubeObject[]))
      if (o.metadata.finalizers?.length) await dropFinalizers(client, r, o.metadata.namespace, o.metadata.name);
  }
}
