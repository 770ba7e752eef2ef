import { detectCalico, type CalicoInstall } from '../calico/detect.js';
import type { KubeClient } from '../kube/client.js';
import { K } from '../kube/builtin.js';
import { parseProviderId } from '../provider-kit/provider-id.js';

export interface NodeStatus {
  name: string;
  providerID?: string;
  /** Provider implied by the providerID: aws, gcp or unknown. */
  provider: string;
  ready: boolean;
  unschedulable: boolean;
}

export interface StatusReport {
  kubernetes: { version: string; server: string; context: string };
  calico: CalicoInstall;
  nodes: NodeStatus[];
}

/** What is in the cluster: Kubernetes version, Calico install, nodes and their providers. */
export async function clusterStatus(client: KubeClient): Promise<StatusReport> {
  const [version, calico, nodes] = await Promise.all([client.serverVersion(), detectCalico(client), client.listAll(K.node)]);
  return {
    kubernetes: { version: version.gitVersion, server: client.connection.server, context: client.connection.contextName },
    calico,
    nodes: nodes.map((n) => ({
      name: n.metadata.name,
      providerID: n.spec?.providerID,
      provider: parseProviderId(n.spec?.providerID).provider,
      ready: !!n.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True'),
      unschedulable: !!n.spec?.unschedulable,
    })),
  };
}
