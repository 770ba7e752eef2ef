/**
 * What cni-rewind knows about Calico, as data in one place (see docs/calico-differences.md).
 * Engine modules read these tables; nothing else hard-codes Calico groups, kinds or versions.
 */
import type { KubeObject } from '../kube/types.js';

/** API groups whose CRDs hold Calico state. */
export const CALICO_CRD_GROUP = 'crd.projectcalico.org';
export const OPERATOR_GROUP = 'operator.tigera.io';
/**
 * Calico ships these kinds in a group shared with other tools: export them, never delete their CRDs.
 * 3.29 adds AdminNetworkPolicy, 3.30 BaselineAdminNetworkPolicy; 3.32 ships ClusterNetworkPolicy instead of both
 * (the older CRDs stay in a cluster upgraded to 3.32, with whatever they hold).
 */
export const SHARED_POLICY_GROUP = 'policy.networking.k8s.io';
export const SHARED_POLICY_KINDS = ['AdminNetworkPolicy', 'BaselineAdminNetworkPolicy', 'ClusterNetworkPolicy'] as const;
/** The aggregated API served by the Calico API server (user-facing view). */
export const CALICO_V3_GROUP = 'projectcalico.org';
/** The APIService the Calico API server is registered under (its objects are then in the Kubernetes API). */
export const CALICO_API_SERVICE = 'v3.projectcalico.org';
/**
 * The annotation cni-rewind (and doctor's fix, by kubectl) sets on an Installation being deleted so that operator
 * v1.32, which watches no namespace, reconciles now and sees its namespace gone, not at its periodic reconcile.
 */
export const INSTALLATION_NUDGE_ANNOTATION = 'cni-rewind.io/nudge';

export const CALICO_GROUPS = [CALICO_CRD_GROUP, OPERATOR_GROUP] as const;

/** Namespaces that hold Calico configuration and workloads. */
export const CALICO_NAMESPACES = ['tigera-operator', 'calico-system', 'calico-apiserver'] as const;
export const OPERATOR_NAMESPACE = 'tigera-operator';
export const OPERATOR_DEPLOYMENT = 'tigera-operator';

/** Label the tigera operator puts on IP pools it manages (operator v1.34+). */
export const OPERATOR_MANAGED_LABEL = 'app.kubernetes.io/managed-by';
export const OPERATOR_MANAGED_VALUE = 'tigera-operator';
/**
 * Objects written through the projectcalico.org/v3 API (calico-node, calicoctl, the operator, the Calico API server)
 * keep their v3 labels and annotations as JSON in this annotation of the crd.projectcalico.org object.
 */
export const V3_METADATA_ANNOTATION = 'projectcalico.org/metadata';

/**
 * The labels of a crd.projectcalico.org object as Calico and the tigera operator see them: when the v3 metadata
 * annotation is present its labels replace metadata.labels entirely (the operator's restoreV3Metadata), so a
 * `kubectl label ippools.crd.projectcalico.org` has no effect on such a pool; label it through the v3 API
 * (`kubectl label ippools.projectcalico.org`, `calicoctl label ippool`).
 */
export function calicoLabels(obj: { metadata: { labels?: Record<string, string>; annotations?: Record<string, string> } }): Record<string, string> {
  const raw = obj.metadata.annotations?.[V3_METADATA_ANNOTATION];
  if (raw !== undefined) {
    try {
      const meta = JSON.parse(raw) as { labels?: Record<string, string> };
      return meta?.labels ?? {};
    } catch {
      // An unreadable annotation makes the operator fail on this pool; fall back to what kubectl shows.
    }
  }
  return obj.metadata.labels ?? {};
}

/** Labelled as the tigera operator reads it (calicoLabels): a pool it manages, adopts and may rewrite or delete. */
export function isOperatorLabelled(pool: KubeObject): boolean {
  return calicoLabels(pool)[OPERATOR_MANAGED_LABEL] === OPERATOR_MANAGED_VALUE;
}

/**
 * The pools an operator that manages pools (v1.34+) deletes given an Installation's `spec.calicoNetwork.ipPools`:
 * the labelled ones whose CIDR no entry lists. A missing list counts as [] while any pool exists (ippool/defaults.go).
 */
export function poolsTheOperatorDeletes(listed: unknown, pools: KubeObject[]): KubeObject[] {
  if (!Array.isArray(listed) && pools.length === 0) return [];
  const cidrs = new Set((Array.isArray(listed) ? listed : []).map((e: any) => e?.cidr));
  return pools.filter((p) => isOperatorLabelled(p) && !cidrs.has(p.spec?.cidr));
}

/**
 * Calico version -> tigera-operator image tag. The shipped releases' rows are checked against their
 * tigera-operator.yaml by a unit test; the others come from the release notes of those tags.
 */
export const OPERATOR_VERSIONS: Record<string, string> = {
  'v3.26.5': 'v1.30.11',
  'v3.27.0': 'v1.32.3',
  'v3.27.4': 'v1.32.10',
  'v3.27.5': 'v1.32.12',
  'v3.28.0': 'v1.34.0',
  'v3.28.1': 'v1.34.3',
  'v3.28.2': 'v1.34.5',
  'v3.28.5': 'v1.34.13',
  'v3.29.0': 'v1.36.0',
  'v3.29.7': 'v1.36.16',
  'v3.30.0': 'v1.38.0',
  'v3.30.7': 'v1.38.13',
  'v3.31.7': 'v1.40.15',
  'v3.32.1': 'v1.42.3',
};

/** Inverse of OPERATOR_VERSIONS: operator tag -> Calico version. */
export function calicoVersionForOperator(tag: string): string | undefined {
  return Object.entries(OPERATOR_VERSIONS).find(([, op]) => op === tag)?.[0];
}

/**
 * Operator minor series -> Calico minor series. Not a formula below v1.32: v1.28 shipped with 3.24, v1.29 with
 * 3.25, v1.30 with 3.26; from v1.32 on two operator minors per Calico minor (v1.32 = 3.27 ... v1.42 = 3.32).
 */
const OPERATOR_MINOR_TO_CALICO: Record<number, number> = { 28: 24, 29: 25, 30: 26 };
export function calicoMinorForOperator(tag: string): string | undefined {
  const m = /^v?1\.(\d+)\./.exec(tag);
  if (!m) return undefined;
  const opMinor = Number(m[1]);
  const fixed = OPERATOR_MINOR_TO_CALICO[opMinor];
  if (fixed !== undefined) return `v3.${fixed}`;
  if (opMinor < 32 || opMinor % 2 !== 0) return undefined;
  return `v3.${27 + (opMinor - 32) / 2}`;
}

/** Image tag of a container image reference (`quay.io/tigera/operator:v1.34.3` -> `v1.34.3`). */
export function imageTag(image: string | undefined): string | undefined {
  if (!image) return undefined;
  const noDigest = image.split('@')[0]!;
  const slash = noDigest.lastIndexOf('/');
  const colon = noDigest.lastIndexOf(':');
  return colon > slash ? noDigest.slice(colon + 1) : undefined;
}

/**
 * The release a tag names: `v3.26.3` -> v3.26.3, `3.26.3` -> v3.26.3, `v3.26.3-gke.12` -> v3.26.3 from vendor gke (a
 * mirror or a provider rebuilds upstream's release and marks its tag). Undefined for a tag that names no release.
 */
export function tagVersion(tag: string | undefined): { version: string; vendor?: string } | undefined {
  const m = tag ? /^v?(\d+\.\d+\.\d+)(?:[-+]([A-Za-z][A-Za-z0-9]*)?[.\w-]*)?$/.exec(tag) : null;
  if (!m) return undefined;
  return { version: `v${m[1]}`, ...(m[2] ? { vendor: m[2] } : {}) };
}

export function normalizeVersion(v: string): string {
  return v.startsWith('v') ? v : `v${v}`;
}

/** Compare two `vX.Y.Z` versions. */
export function compareVersions(a: string, b: string): number {
  const pa = normalizeVersion(a)
    .slice(1)
    .split(/[.-]/)
    .map((x) => Number.parseInt(x, 10) || 0);
  const pb = normalizeVersion(b)
    .slice(1)
    .split(/[.-]/)
    .map((x) => Number.parseInt(x, 10) || 0);
  for (let i = 0; i < 3; i++) if ((pa[i] ?? 0) !== (pb[i] ?? 0)) return (pa[i] ?? 0) - (pb[i] ?? 0);
  return 0;
}

// ---------- doctor: operator IP-pool behaviour, IPAM conventions, CRD schema markers ----------

/**
 * How the tigera operator of a Calico minor treats IP pools (docs/calico-differences.md, "Operator-managed IP pools").
 * `managesPools`: treats Installation.spec.calicoNetwork.ipPools as desired state (adopts, rewrites, deletes).
 * `stopAllocations`: the supported way to stop allocations from a pool it manages (its pool type has no `disabled`).
 * `onePoolPerFamily`: the operator refuses more than one Installation pool per IP family.
 */
export interface OperatorPoolBehaviour {
  /** Calico minor this row starts at, `v3.N`; a version uses the last row not newer than it. */
  since: string;
  managesPools: boolean;
  stopAllocations?: { field: string; value: unknown; text: string };
  onePoolPerFamily: boolean;
}
/**
 * The node selector that selects no node: 3.28's way to stop allocations from a pool the operator manages. Operator
 * v1.34 writes an owned pool from its entry with this selector and without `disabled`, which its pool type lacks
 * (api/v1/installation_types.go ToProjectCalicoV1, v1.34.3:680-730; pool_controller.go:286,304 and
 * utils/component.go:551-553 replace the pool's spec with it). IPAM then picks the pool for no node, though it still
 * serves a pod that names it in its cni.projectcalico.org/ipv4pools annotation (libcalico-go ipam.go
 * determinePools, 3.28.1:297-302).
 */
export const NODE_SELECTOR_STOP = '!all()';
export const OPERATOR_POOL_BEHAVIOUR: OperatorPoolBehaviour[] = [
  { since: 'v3.0', managesPools: false, onePoolPerFamily: true },
  {
    since: 'v3.28',
    managesPools: true,
    stopAllocations: { field: 'nodeSelector', value: NODE_SELECTOR_STOP, text: `nodeSelector: "${NODE_SELECTOR_STOP}"` },
    onePoolPerFamily: false,
  },
  {
    since: 'v3.29',
    managesPools: true,
    stopAllocations: { field: 'disableNewAllocations', value: true, text: 'disableNewAllocations: true' },
    onePoolPerFamily: false,
  },
];

/**
 * The TigeraStatus the operator's IP pool controller writes. Only operators that manage pools have that controller
 * (tigera/operator pkg/controller/ippool, first in v1.34 = Calico 3.28; v1.32 has none), so an older operator never
 * reports it.
 */
export const POOL_CONTROLLER_REPORT = 'ippools';

export function operatorPoolBehaviour(calicoVersion: string): OperatorPoolBehaviour {
  let row = OPERATOR_POOL_BEHAVIOUR[0]!;
  for (const r of OPERATOR_POOL_BEHAVIOUR) if (compareVersions(calicoVersion, `${r.since}.0`) >= 0) row = r;
  return row;
}

/** IPAM: CNI handle ids are `k8s-pod-network.<containerID>`; tunnel addresses use `<kind>-tunnel-addr-<node>`. */
export const IPAM_POD_HANDLE_PREFIX = 'k8s-pod-network.';
export const IPAM_TUNNEL_HANDLE = /^(?:ipip|vxlan|vxlan-v6|wireguard|wireguard-v6)-tunnel-addr-(.+)$/;
/**
 * IPAM kinds whose objects change with every pod created or deleted: live state, never compared with a bundle as
 * configuration nor written over the cluster's (src/restore/ipam.ts). IPAMConfig is configuration.
 */
export const IPAM_LIVE_KINDS: ReadonlySet<string> = new Set(['IPAMBlock', 'IPAMHandle', 'BlockAffinity']);
/**
 * Node annotations whose tunnel addresses `calicoctl ipam check` counts as in use (calicoctl 3.28 getNodeIPs: the
 * IPv4 VXLAN, WireGuard and IPIP addresses only; libcalico-go k8s/resources/node.go names the annotations).
 */
export const NODE_TUNNEL_ADDR_ANNOTATIONS = [
  'projectcalico.org/IPv4VXLANTunnelAddr',
  'projectcalico.org/IPv4WireguardInterfaceAddr',
  'projectcalico.org/IPv4IPIPTunnelAddr',
];
/** libcalico-go ipam_block.go WindowsReservedHandle: addresses reserved for Windows, in use by definition. */
export const IPAM_WINDOWS_RESERVED_HANDLE = 'windows-reserved-ipam-handle';
/**
 * Releasing leaked addresses the way calicoctl accepts it: `ipam release --from-report` refuses unless the datastore
 * is locked and the report was taken after the lock (it compares the ClusterInformation revision, which the lock
 * changes). While locked, every CNI ADD/DEL fails, so run the four lines without a pause.
 */
export const IPAM_RELEASE_RECIPE = [
  'calicoctl datastore migrate lock',
  'calicoctl ipam check --show-problem-ips -o ipam-report.json',
  'calicoctl ipam release --from-report=ipam-report.json',
  'calicoctl datastore migrate unlock',
];
/** IPAMBlock.spec.affinity is `host:<node>` for node-affine blocks. */
export const IPAM_HOST_AFFINITY_PREFIX = 'host:';
/** Pod annotations Calico's CNI plugin writes. */
export const POD_ANNOTATION_CONTAINER_ID = 'cni.projectcalico.org/containerID';
export const POD_ANNOTATION_PREFIX = 'cni.projectcalico.org/';
/** libcalico-go conversion.go getPodIPs: read when the pod's status has no address yet. */
export const POD_ANNOTATION_POD_IPS = 'cni.projectcalico.org/podIPs';
export const POD_ANNOTATION_POD_IP = 'cni.projectcalico.org/podIP';

/**
 * A field that first appears in a Calico minor's CRD schemas: finding one in the installed CRDs means the CRDs are
 * at least that version (used to spot CRDs newer than the running operator: a half-done downgrade).
 * `path` walks openAPIV3Schema `properties` (and `items` for `[]`).
 */
export const CRD_SCHEMA_MARKERS: { since: string; kind: string; path: string }[] = [
  { since: 'v3.27', kind: 'Installation', path: 'spec.serviceCIDRs' },
  { since: 'v3.28', kind: 'Installation', path: 'spec.calicoNetwork.ipPools[].name' },
  { since: 'v3.28', kind: 'FelixConfiguration', path: 'spec.debugHost' },
  { since: 'v3.29', kind: 'Installation', path: 'spec.calicoNetwork.ipPools[].disableNewAllocations' },
  { since: 'v3.30', kind: 'IPPool', path: 'spec.assignmentMode' },
  { since: 'v3.30', kind: 'BlockAffinity', path: 'spec.type' },
  { since: 'v3.31', kind: 'Installation', path: 'spec.calicoNetwork.kubeProxyManagement' },
  { since: 'v3.31', kind: 'BGPPeer', path: 'spec.localASNumber' },
  { since: 'v3.32', kind: 'Installation', path: 'spec.calicoNetwork.clusterRoutingMode' },
  { since: 'v3.32', kind: 'BGPConfiguration', path: 'spec.programClusterRoutes' },
];

/** Workloads of a Calico install whose readiness doctor checks, by name (calico-system for operator installs, kube-system for manifests). */
export const CALICO_WORKLOADS: { kind: 'DaemonSet' | 'Deployment'; name: string; namespaces: string[] }[] = [
  { kind: 'Deployment', name: OPERATOR_DEPLOYMENT, namespaces: [OPERATOR_NAMESPACE] },
  { kind: 'DaemonSet', name: 'calico-node', namespaces: ['calico-system', 'kube-system'] },
  { kind: 'Deployment', name: 'calico-typha', namespaces: ['calico-system', 'kube-system'] },
  { kind: 'Deployment', name: 'calico-kube-controllers', namespaces: ['calico-system', 'kube-system'] },
];

/** What `export` captures outside the Calico CRDs (see docs/calico-differences.md "Calico state outside the Calico CRDs"). */
export const EXPORT_CONFIG = {
  /** ConfigMaps and Secrets of these namespaces are exported whole. */
  namespaces: CALICO_NAMESPACES,
  /** Single objects exported when present (manifest installs keep their config in kube-system). */
  objects: [
    { namespace: 'kube-system', kind: 'ConfigMap', name: 'calico-config' },
    { namespace: OPERATOR_NAMESPACE, kind: 'Deployment', name: OPERATOR_DEPLOYMENT },
    { namespace: 'kube-system', kind: 'DaemonSet', name: 'calico-node' },
  ],
  /** Created by Kubernetes itself in every namespace: not Calico state. */
  skipConfigMaps: ['kube-root-ca.crt'],
  /** Service account tokens are minted by Kubernetes and must not be restored. */
  skipSecretTypes: ['kubernetes.io/service-account-token'],
  /** Node annotations with this prefix are Calico's (IPv4Address, IPv4IPIPTunnelAddr, ASNumber, ...). */
  nodeAnnotationPrefix: 'projectcalico.org/',
} as const;
