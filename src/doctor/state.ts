/**
 * CalicoState: everything doctor's checks look at, as plain data, so the checks are pure functions that run the
 * same on a live cluster (`loadLiveState`) and on a bundle offline (`loadBundleState`).
 */
import type { DatastoreInfo } from '../calico/install-method.js';
import type { Reconciler } from '../calico/gitops.js';
import type { InstallType } from '../calico/detect.js';
import { CALICO_CRD_GROUP, CALICO_WORKLOADS, NODE_TUNNEL_ADDR_ANNOTATIONS, OPERATOR_GROUP, POD_ANNOTATION_PREFIX } from '../calico/knowledge.js';
import type { KubeObject } from '../kube/types.js';

export interface NodeInfo {
  name: string;
  /** Undefined when the source does not say (a bundle keeps node annotations, not conditions). */
  ready?: boolean;
  /** The node's tunnel addresses (NODE_TUNNEL_ADDR_ANNOTATIONS), which its IPAM allocations are in use by. */
  tunnelIPs?: string[];
}

export interface PodInfo {
  namespace: string;
  name: string;
  node?: string;
  phase?: string;
  hostNetwork: boolean;
  podIPs: string[];
  /** `cni.projectcalico.org/*` annotations (containerID, podIP, podIPs). */
  calicoAnnotations: Record<string, string>;
}

export interface WorkloadInfo {
  kind: 'DaemonSet' | 'Deployment';
  namespace: string;
  name: string;
  /** Image of the main container (the one named like the workload, else the first). */
  image?: string;
  desired: number;
  ready: number;
}

export interface CalicoState {
  source: { type: 'cluster'; server: string } | { type: 'bundle'; path: string; createdAt?: string };
  /** Calico custom objects keyed `<plural>.<group>` (e.g. `ippools.crd.projectcalico.org`). */
  objects: Record<string, KubeObject[]>;
  /** CustomResourceDefinitions of the Calico groups. */
  crds: KubeObject[];
  /** Names of the projectcalico.org CRDs (Calico 3.32's v3-CRD mode, src/calico/v3-crds.ts); absent in a bundle. */
  v3Crds?: string[];
  /** Undefined when the source has no node list. */
  nodes?: NodeInfo[];
  /** Undefined when the source has no pods (bundles do not keep pods): the pod-based checks are then skipped. */
  pods?: PodInfo[];
  workloads: WorkloadInfo[];
  installType: InstallType;
  /** Where Calico keeps its data; absent for a bundle (a bundle is only ever made of a Kubernetes datastore). */
  datastore?: DatastoreInfo;
  /** Argo CD / Flux owners of Calico's objects, read and judged (gitops.ts); absent in a bundle. */
  reconcilers?: Reconciler[];
  /** Calico's namespaces that exist (CALICO_NAMESPACES), with their owners; absent in a bundle. */
  namespaces?: NamespaceInfo[];
}

export interface NamespaceInfo {
  name: string;
  owners: { apiVersion: string; kind: string; name: string; uid: string }[];
  terminating: boolean;
  /** Why its deletion cannot finish, when kube-controller-manager says discovery failed (condition NamespaceDeletionDiscoveryFailure). */
  discoveryFailure?: string;
}

/** Keys of the objects the checks read. */
export const KEYS = {
  ipPools: `ippools.${CALICO_CRD_GROUP}`,
  ipamBlocks: `ipamblocks.${CALICO_CRD_GROUP}`,
  ipamHandles: `ipamhandles.${CALICO_CRD_GROUP}`,
  blockAffinities: `blockaffinities.${CALICO_CRD_GROUP}`,
  clusterInformations: `clusterinformations.${CALICO_CRD_GROUP}`,
  installations: `installations.${OPERATOR_GROUP}`,
  tigeraStatuses: `tigerastatuses.${OPERATOR_GROUP}`,
} as const;

export function objectsOf(state: CalicoState, key: string): KubeObject[] {
  return state.objects[key] ?? [];
}

/** The default Installation (the operator only reconciles the one named `default`). */
export function installation(state: CalicoState): KubeObject | undefined {
  return objectsOf(state, KEYS.installations).find((o) => o.metadata.name === 'default');
}

export function workload(state: CalicoState, name: string): WorkloadInfo | undefined {
  return state.workloads.find((w) => w.name === name);
}

/** `Kind/name` or `Kind/namespace/name`: how findings name objects. */
export function ref(obj: { kind: string; metadata: { name: string; namespace?: string } }): string {
  return obj.metadata.namespace ? `${obj.kind}/${obj.metadata.namespace}/${obj.metadata.name}` : `${obj.kind}/${obj.metadata.name}`;
}

export function podRef(p: PodInfo): string {
  return `Pod/${p.namespace}/${p.name}`;
}

// ---------- shaping raw Kubernetes objects (shared by the live and the bundle loader) ----------

export function toPodInfo(p: KubeObject): PodInfo {
  const ips: string[] = (p.status?.podIPs ?? []).map((x: { ip: string }) => x.ip).filter(Boolean);
  if (ips.length === 0 && p.status?.podIP) ips.push(p.status.podIP);
  const ann = p.metadata.annotations ?? {};
  return {
    namespace: p.metadata.namespace ?? 'default',
    name: p.metadata.name,
    node: p.spec?.nodeName,
    phase: p.status?.phase,
    hostNetwork: !!p.spec?.hostNetwork,
    podIPs: ips,
    calicoAnnotations: Object.fromEntries(Object.entries(ann).filter(([k]) => k.startsWith(POD_ANNOTATION_PREFIX))),
  };
}

export function toNodeInfo(n: KubeObject): NodeInfo {
  const conds: any[] | undefined = n.status?.conditions;
  return { name: n.metadata.name, ready: conds ? conds.some((c) => c.type === 'Ready' && c.status === 'True') : undefined, tunnelIPs: nodeTunnelIPs(n) };
}

/** The tunnel addresses libcalico-go keeps in a Kubernetes Node's annotations (a CIDR or a bare address). */
export function nodeTunnelIPs(n: KubeObject): string[] {
  const ann = n.metadata.annotations ?? {};
  return NODE_TUNNEL_ADDR_ANNOTATIONS.map((k) => ann[k]?.split('/')[0]).filter((ip): ip is string => !!ip);
}

/** A DaemonSet or Deployment as a WorkloadInfo, when it is one of the Calico workloads doctor watches. */
export function toWorkloadInfo(o: KubeObject): WorkloadInfo | undefined {
  const known = CALICO_WORKLOADS.find((w) => w.kind === o.kind && w.name === o.metadata.name && w.namespaces.includes(o.metadata.namespace ?? ''));
  if (!known) return undefined;
  const containers: any[] = o.spec?.template?.spec?.containers ?? [];
  const main = containers.find((c) => c.name === o.metadata.name) ?? containers.find((c) => o.metadata.name.endsWith(c.name)) ?? containers[0];
  const st = o.status ?? {};
  const isDs = o.kind === 'DaemonSet';
  return {
    kind: known.kind,
    namespace: o.metadata.namespace!,
    name: o.metadata.name,
    image: main?.image,
    desired: isDs ? (st.desiredNumberScheduled ?? 0) : (o.spec?.replicas ?? 1),
    ready: isDs ? (st.numberReady ?? 0) : (st.readyReplicas ?? 0),
  };
}

export function installTypeOf(workloads: WorkloadInfo[], crds: KubeObject[]): InstallType {
  if (workloads.some((w) => w.name === 'tigera-operator')) return 'operator';
  if (workloads.some((w) => w.namespace === 'kube-system') || crds.some((c) => c.spec?.group === CALICO_CRD_GROUP)) return 'manifest';
  return 'none';
}
