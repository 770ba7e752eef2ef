import { K } from './builtin.js';
import type { KubeClient } from './client.js';

/**
 * The cluster's identity: the UID of the kube-system namespace, which every cluster has and which changes only
 * when the cluster is rebuilt. Export records it as the bundle's cluster.uid; plan, apply and restore compare it.
 */
export async function clusterUid(client: KubeClient): Promise<string> {
  return (await client.get(K.namespace, undefined, 'kube-system')).metadata.uid ?? '';
}
