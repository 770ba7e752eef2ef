/** Build a CalicoState from the live cluster or from a bundle. */
import { CALICO_GROUPS, CALICO_NAMESPACES, CALICO_WORKLOADS } from '../calico/knowledge.js';
import { v3CrdModeOf } from '../calico/v3-crds.js';
import { readDatastore, type DatastoreInfo } from '../calico/install-method.js';
import { readReconcilers, type Reconciler } from '../calico/gitops.js';
import type { Bundle } from '../bundle/reader.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import { K } from '../kube/builtin.js';
import { crdResourceType, listCrds } from '../kube/discovery.js';
import { pool } from '../util/pool.js';
import { groupOf, resourceKey, type KubeObject } from '../kube/types.js';
import { installTypeOf, nodeTunnelIPs, toNodeInfo, toPodInfo, toWorkloadInfo, type CalicoState, type NamespaceInfo, type WorkloadInfo } from './state.js';

/**
 * Read everything the checks need from the live cluster. Pods and IPAM objects are listed page by page.
 * `only`: the Calico kinds to list (resource keys, `ippools.crd.projectcalico.org`), for a caller that runs one check
 * (restore's read-back needs pools and blocks, not 100k handles); the others stay absent, as in a cluster without them.
 * `known`: what the caller already judged from the same objects (plan: the datastore and the GitOps owners), not read again.
 */
export async function loadLiveState(
  client: KubeClient,
  only?: readonly string[],
  known: { datastore?: DatastoreInfo; reconcilers?: Reconciler[] } = {},
): Promise<CalicoState> {
  const crds = await listCrds(client, CALICO_GROUPS);
  const objects: Record<string, KubeObject[]> = {};
  const wanted = only ? crds.filter((crd) => only.includes(resourceKey(crdResourceType(crd)))) : crds;
  await pool(wanted, 4, async (crd) => {
    const type = crdResourceType(crd);
    try {
      objects[resourceKey(type)] = await client.listAll(type);
    } catch (err) {
      // A CRD created a moment ago may not be served yet: it holds nothing then.
      if (!(err instanceof KubeApiError && err.notFound)) throw err;
      objects[resourceKey(type)] = [];
    }
  });
  const [nodes, pods, workloads, allCrds, datastore, reconcilers, namespaces] = await Promise.all([
    client.listAll(K.node),
    client.listAll(K.pod),
    loadWorkloads(client),
    client.listMetadata(K.crd),
    known.datastore ?? readDatastore(client),
    // A caller running one check (restore's read-back) needs no owners.
    only ? [] : (known.reconcilers ?? readReconcilers(client)),
    only ? undefined : readCalicoNamespaces(client),
  ]);
  const v3Crds = v3CrdModeOf(allCrds.map((c) => c.metadata.name))?.crds;
  return {
    source: { type: 'cluster', server: client.connection.server },
    objects,
    crds,
    ...(v3Crds ? { v3Crds } : {}),
    nodes: nodes.map(toNodeInfo),
    pods: pods.map(toPodInfo),
    workloads,
    installType: installTypeOf(workloads, crds),
    datastore,
    ...(reconcilers.length ? { reconcilers } : {}),
    ...(namespaces ? { namespaces } : {}),
  };
}

async function readCalicoNamespaces(client: KubeClient): Promise<NamespaceInfo[]> {
  const found = await Promise.all(CALICO_NAMESPACES.map((name) => client.getOrUndefined(K.namespace, undefined, name)));
  return found
    .filter((ns): ns is KubeObject => ns !== undefined)
    .map((ns) => ({
      name: ns.metadata.name!,
      owners: (ns.metadata.ownerReferences ?? []).map((o: any) => ({ apiVersion: o.apiVersion, kind: o.kind, name: o.name, uid: o.uid })),
      terminating: !!ns.metadata.deletionTimestamp,
      ...discoveryFailureOf(ns),
    }));
}

function discoveryFailureOf(ns: KubeObject): { discoveryFailure?: string } {
  const c = (ns.status?.conditions ?? []).find((x: any) => x?.type === 'NamespaceDeletionDiscoveryFailure' && x?.status === 'True');
  return c ? { discoveryFailure: String(c.message ?? c.reason ?? '') } : {};
}

async function loadWorkloads(client: KubeClient): Promise<WorkloadInfo[]> {
  const out: WorkloadInfo[] = [];
  for (const w of CALICO_WORKLOADS) {
    for (const ns of w.namespaces) {
      const obj = await client.getOrUndefined(w.kind === 'DaemonSet' ? K.daemonSet : K.deployment, ns, w.name);
      const info = obj && toWorkloadInfo({ ...obj, kind: w.kind });
      if (info) {
        out.push(info);
        break;
      }
    }
  }
  return out;
}

/** Build the state from a bundle, offline. Bundles keep no pods, so `pods` stays undefined. */
export async function loadBundleState(bundle: Bundle): Promise<CalicoState> {
  const crds = (await bundle.crds()).filter((c) => (CALICO_GROUPS as readonly string[]).includes(c.spec?.group));
  // apiVersion+kind -> `<plural>.<group>`, from the bundle's CRDs, else from the manifest's resource list.
  const plurals = new Map<string, string>();
  for (const r of bundle.manifest.resources ?? []) plurals.set(`${r.group}/${r.kind}`, r.plural);
  for (const c of crds) plurals.set(`${c.spec.group}/${c.spec.names.kind}`, c.spec.names.plural);
  const objects: Record<string, KubeObject[]> = {};
  // A kind exported with no objects is present and empty (as in the live cluster): its checks still run.
  for (const r of bundle.manifest.resources ?? []) if ((CALICO_GROUPS as readonly string[]).includes(r.group)) objects[r.key] ??= [];
  for (const c of crds) objects[resourceKey({ plural: c.spec.names.plural, group: c.spec.group })] ??= [];
  for await (const { object } of bundle.objects({ groups: [...CALICO_GROUPS] })) {
    const group = groupOf(object.apiVersion);
    const plural = plurals.get(`${group}/${object.kind}`) ?? `${object.kind.toLowerCase()}s`;
    (objects[resourceKey({ plural, group })] ??= []).push(object);
  }
  const workloads: WorkloadInfo[] = [];
  // Only the workload files: Secrets are never read (an encrypted bundle needs no key for doctor).
  for (const file of Object.keys(bundle.manifest.files).sort()) {
    if (!/^config\/[^/]+\/(DaemonSet|Deployment)\/[^/]+\.ya?ml$/.test(file)) continue;
    const info = toWorkloadInfo(await bundle.readObject(file));
    if (info) workloads.push(info);
  }
  return {
    source: { type: 'bundle', path: bundle.source, createdAt: bundle.manifest.createdAt },
    objects,
    crds,
    nodes: await bundleNodes(bundle),
    pods: undefined,
    workloads,
    installType: bundle.manifest.calico?.installType ?? installTypeOf(workloads, crds),
  };
}

/** nodes/<node>.yaml: one record per node at export time (annotations only, so readiness is unknown). */
async function bundleNodes(bundle: Bundle): Promise<CalicoState['nodes']> {
  const out: NonNullable<CalicoState['nodes']> = [];
  for await (const { object } of bundle.nodeObjects()) out.push({ name: object.metadata.name, ready: undefined, tunnelIPs: nodeTunnelIPs(object) });
  // An export always writes node records; a bundle with none did not record nodes (or the cluster had none).
  return out.length > 0 || (bundle.manifest.counts?.nodes ?? 0) > 0 ? out : undefined;
}
