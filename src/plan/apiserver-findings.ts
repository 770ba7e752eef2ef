import { compareVersions, OPERATOR_GROUP } from '../calico/knowledge.js';
import type { Release } from '../calico/release.js';
import type { LiveCalico } from './live.js';
import { objRef } from './live.js';
import type { PlanFinding } from './types.js';

/**
 * The release whose operator (v1.40) first runs the Calico API server in calico-system. It renders the Deployment
 * `calico-apiserver`, Service `calico-api`, ServiceAccount, PodDisruptionBudget and NetworkPolicy `allow-apiserver`
 * there and deletes the calico-apiserver namespace as deprecated (tigera/operator v1.40.15 pkg/render/apiserver.go:64
 * `APIServerNamespace = common.CalicoNamespace`, :226-232, :1395, getDeprecatedResources :2233-2236).
 */
export const API_SERVER_IN_CALICO_SYSTEM = 'v3.31.0';

/** What v1.40+ puts in calico-system for the API server and no older operator knows (apiserver.go Objects). */
const MOVED_OBJECTS = [
  'deployment/calico-apiserver',
  'service/calico-api',
  'poddisruptionbudget/calico-apiserver',
  'networkpolicy.networking.k8s.io/allow-apiserver',
  'serviceaccount/calico-apiserver',
];

/**
 * A downgrade from 3.31+ to below 3.31 with an APIServer: the target operator (v1.38 or older) renders its API server
 * in calico-apiserver again and never looks at calico-system's, which keeps running the newer release's image beside
 * it (seen in the path matrix's 3.31.7 -> 3.30.7). The APIService is the target's again, so the leftover serves no
 * request; it is said, with the command that removes it, and not deleted by the plan (the user may be on the way back
 * up, where v1.40 would make it again).
 */
export function apiServerMoveFindings(live: LiveCalico, target: Release, current: { version?: string }): PlanFinding[] {
  if (!current.version || compareVersions(current.version, API_SERVER_IN_CALICO_SYSTEM) < 0) return [];
  if (compareVersions(target.version, API_SERVER_IN_CALICO_SYSTEM) >= 0) return [];
  const apiServers = live.objects.get(`apiservers.${OPERATOR_GROUP}`) ?? [];
  if (!apiServers.length) return [];
  return [
    {
      id: 'api-server-left-in-calico-system',
      severity: 'warning',
      title: `the ${current.version} API server in calico-system keeps running after the downgrade to ${target.version}`,
      objects: [...apiServers.map(objRef), 'Deployment/calico-system/calico-apiserver'],
      details: [
        `operator ${current.version}'s runs the API server in calico-system; ${target.version}'s runs its own in calico-apiserver and neither updates nor removes the other`,
        `the APIService points at ${target.version}'s once it runs, so the leftover serves nothing; to remove it once you stay on ${target.version}: kubectl -n calico-system delete ${MOVED_OBJECTS.join(' ')}`,
      ],
      action: 'keep',
      plan: 'kept (the plan deletes no workload; a later upgrade to 3.31+ makes it its own again)',
    },
  ];
}
