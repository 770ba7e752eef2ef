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

/**
 * Whether a release's Calico API server gives projectcalico.org/v3 objects UIDs of their own. Up to 3.27.4 a Profile
 * made for a Namespace or ServiceAccount (kns.*, ksa.*) carried that object's own UID (libcalico-go
 * conversion.go NamespaceToProfile, 3.26.5:108); 3.27.5 and 3.28.1 derive one (ConvertUID, 3.27.5:832-846; calico
 * PRs #8586, #9191). 3.28.0 is not in the mirror: unknown, so a path through it is said too.
 */
export function distinctV3Uids(version: string): boolean | undefined {
  if (compareVersions(version, 'v3.28.1') >= 0) return true;
  if (compareVersions(version, 'v3.28.0') >= 0) return undefined;
  return compareVersions(version, 'v3.27.5') >= 0;
}

/**
 * A path across that change, with the Calico API server serving projectcalico.org/v3: every v3 object's UID changes,
 * and kube-controller-manager's garbage collector, which keys its graph by UID, confuses the Profile for a Namespace
 * with the Namespace (its owners replaced, then the node dropped when the old UID's Profile goes). It then never
 * collects such a Namespace or ServiceAccount when its owner goes: operator v1.32's Installation finalizer waits for
 * calico-apiserver, owned by APIServer default, and `kubectl delete installation default` hangs (seen in the path
 * matrix's 3.26.5 -> 3.27.5, with the collector's log). Calico's release note for #9191 asks for a restart of
 * kube-controller-manager after such an upgrade; the plan says so, as it cannot restart it on every kind of cluster.
 */
export function v3UidFindings(target: Release, current: { version?: string }, apiServerServed: boolean): PlanFinding[] {
  if (!apiServerServed || !current.version) return [];
  const [from, to] = [distinctV3Uids(current.version), distinctV3Uids(target.version)];
  if (from !== undefined && from === to) return [];
  return [
    {
      id: 'v3-uids-change',
      severity: 'warning',
      title: `the UIDs of projectcalico.org/v3 objects change between ${current.version} and ${target.version}: restart kube-controller-manager after apply`,
      objects: ['APIService/v3.projectcalico.org'],
      details: [
        `${to ? target.version : current.version}'s API server gives each v3 object (the Profiles of every Namespace and ServiceAccount among them) a UID of its own; ${to ? current.version : target.version}'s gave them their source's (calico PRs #8586, #9191)`,
        "until kube-controller-manager restarts, its garbage collector may never delete a Namespace or ServiceAccount whose owner is deleted (calico-apiserver among them, which operator v1.32's Installation finalizer waits for: `kubectl delete installation default` would hang)",
        'restart it once apply has finished (kubeadm: move its static pod manifest out of /etc/kubernetes/manifests and back; managed clusters: the provider restarts it on its own schedule)',
      ],
      action: 'keep',
      plan: 'applied as planned; restart kube-controller-manager afterwards, as Calico advises for this change',
    },
  ];
}
