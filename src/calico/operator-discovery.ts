/**
 * operator.tigera.io kinds whose mere presence in the API (discovery, not objects) changes what a tigera operator
 * does when it starts. Read in tigera/operator pkg/controller/utils/discovery.go (v1.30.11, v1.32.10, v1.34.3,
 * v1.36.16, v1.38.13, v1.40.15; pkg/common/discovery/discovery.go in v1.42.3) and main.go:
 * - `RequiresTigeraSecure`: any of these kinds served -> the operator takes the cluster for Calico Enterprise and
 *   starts the Enterprise controllers, which wait for caches of Enterprise kinds (LogStorage, ...) that an OSS
 *   cluster does not serve; the operator exits when they never sync ("failed to wait for
 *   log-storage-esmetrics-controller caches to sync", seen with v1.34.3 every ~2 minutes while 3.30's
 *   ManagementClusterConnection CRD was kept).
 * - `RequiresAmazonController` (v1.30, v1.32): AmazonCloudIntegration served -> the AWS controllers start.
 * - `MultiTenant`: a namespaced Manager kind -> multi-tenant mode.
 * 3.30 made ManagementClusterConnection an OSS kind (operator-crds.yaml ships its CRD) and v1.38 dropped it from the
 * list, so a downgrade that keeps that CRD turns the older operator into an Enterprise one.
 */
import { compareVersions, OPERATOR_GROUP } from './knowledge.js';

export interface OperatorDiscoveryRow {
  /** Calico minor (`v3.N`) whose operator this row describes; a version uses the last row not newer than it. */
  since: string;
  operator: string;
  /** Kind -> what the operator does when discovery lists it (`namespacedOnly`: only when the kind is namespaced). */
  kinds: Record<string, DiscoveredKind>;
}

export interface DiscoveredKind {
  effect: string;
  namespacedOnly?: boolean;
}

const ENTERPRISE = 'RequiresTigeraSecure: the operator runs the Calico Enterprise controllers, which never sync on an OSS cluster (the operator exits)';
const enterprise = (kinds: string[]): Record<string, DiscoveredKind> => Object.fromEntries(kinds.map((k) => [k, { effect: ENTERPRISE }]));
const BASE = ['LogCollector', 'LogStorage', 'Compliance', 'IntrusionDetection', 'ApplicationLayer', 'Monitor', 'ManagementCluster', 'EgressGateway'];
const MULTI_TENANT = { Manager: { effect: 'MultiTenant: a namespaced Manager kind puts the operator in multi-tenant mode', namespacedOnly: true } };

export const OPERATOR_DISCOVERY: OperatorDiscoveryRow[] = [
  {
    since: 'v3.26',
    operator: 'v1.30/v1.32',
    kinds: {
      ...enterprise([...BASE, 'AmazonCloudIntegration', 'ManagementClusterConnection']),
      AmazonCloudIntegration: { effect: `${ENTERPRISE}; RequiresAmazonController: the AWS controllers start` },
      ...MULTI_TENANT,
    },
  },
  { since: 'v3.28', operator: 'v1.34/v1.36', kinds: { ...enterprise([...BASE, 'ManagementClusterConnection']), ...MULTI_TENANT } },
  { since: 'v3.30', operator: 'v1.38+', kinds: { ...enterprise(BASE), ...MULTI_TENANT } },
];

/** The kinds (with their effect) whose presence changes what the operator of Calico `calicoVersion` does. */
export function kindsTheOperatorDiscovers(calicoVersion: string): Record<string, DiscoveredKind> {
  let row = OPERATOR_DISCOVERY[0]!;
  for (const r of OPERATOR_DISCOVERY) if (compareVersions(calicoVersion, `${r.since}.0`) >= 0) row = r;
  return row.kinds;
}

/**
 * What a live CRD's mere presence would make the operator of Calico `calicoVersion` do (undefined: nothing). Only
 * operator.tigera.io/v1 is looked at by the operator's discovery.
 */
export function operatorEffectOfCrd(crd: { spec?: any }, calicoVersion: string): string | undefined {
  const spec = crd.spec ?? {};
  if (spec.group !== OPERATOR_GROUP || !(spec.versions ?? []).some((v: any) => v.name === 'v1' && v.served !== false)) return undefined;
  const k = kindsTheOperatorDiscovers(calicoVersion)[String(spec.names?.kind)];
  if (!k || (k.namespacedOnly && spec.scope !== 'Namespaced')) return undefined;
  return k.effect;
}
