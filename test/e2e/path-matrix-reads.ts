/** Reads of the cluster the path matrix judges by (path-matrix-support.ts). */
import { policyTier } from '../../src/calico/policy-names.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject } from '../../src/kube/types.js';
import { calicoType } from './helpers.js';

/** Whether the Calico API server gives Profile kns.default the UID of Namespace default (Calico up to 3.27.4). */
export async function profileSharesNamespaceUid(client: KubeClient): Promise<boolean> {
  const ns = await client.get<KubeObject>(K.namespace, undefined, 'default');
  const profile = await client.request<KubeObject>('GET', '/apis/projectcalico.org/v3/profiles/kns.default');
  return profile.metadata.uid === ns.metadata.uid;
}

/** The stored (crd.projectcalico.org) names of the default-tier policies, `namespace/name` for namespaced ones. */
export async function storedPolicyNames(client: KubeClient): Promise<string[]> {
  const defaultTier = (o: KubeObject) => policyTier(o) === 'default';
  const gnps = await client.listAll<KubeObject>(calicoType('globalnetworkpolicies', 'GlobalNetworkPolicy'));
  const nps = await client.listAll<KubeObject>(calicoType('networkpolicies', 'NetworkPolicy', true));
  return [...gnps.filter(defaultTier).map((o) => o.metadata.name!), ...nps.filter(defaultTier).map((o) => `${o.metadata.namespace}/${o.metadata.name}`)];
}
