import { randomUUID } from 'node:crypto';
import type { KubeClient } from '../../kube/client.js';
import { KubeApiError } from '../../kube/client.js';
import { K } from '../../kube/builtin.js';
import type { KubeObject } from '../../kube/types.js';

export interface FakeNodeSpec {
  name: string;
  providerID?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** Last octet of the node's InternalIP 127.0.1.N. */
  ipIndex?: number;
}

/**
 * A Node that kwok manages (annotation `kwok.x-k8s.io/node: fake`), created with its status set,
 * untainted and labelled like a Linux node, so Calico's DaemonSets and Deployments schedule onto it.
 */
export function fakeNode(spec: FakeNodeSpec): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: spec.name,
      annotations: { 'kwok.x-k8s.io/node': 'fake', 'node.alpha.kubernetes.io/ttl': '0', ...spec.annotations },
      labels: {
        'kubernetes.io/hostname': spec.name,
        'kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
        type: 'kwok',
        ...spec.labels,
      },
    },
    spec: spec.providerID ? { providerID: spec.providerID } : {},
    status: {
      allocatable: { cpu: '8', memory: '32Gi', pods: '110' },
      capacity: { cpu: '8', memory: '32Gi', pods: '110' },
      addresses: [{ type: 'InternalIP', address: `127.0.1.${spec.ipIndex ?? 1}` }],
      // A kubelet reports its machine's boot id; kwok's stages leave it alone (kwok-config.ts).
      nodeInfo: { kubeletVersion: 'fake', operatingSystem: 'linux', architecture: 'amd64', bootID: randomUUID() },
    },
  };
}

export async function createFakeNodes(client: KubeClient, specs: FakeNodeSpec[], opts: { waitReady?: boolean } = {}): Promise<void> {
  for (const [i, s] of specs.entries()) {
    try {
      await client.create(K.node, fakeNode({ ipIndex: i + 1, ...s }));
    } catch (err) {
      if (!(err instanceof KubeApiError && err.conflict)) throw err;
    }
  }
  if (opts.waitReady !== false) {
    for (const s of specs) await waitNodeReady(client, s.name);
  }
}

export async function waitNodeReady(client: KubeClient, name: string, timeoutMs = 60_000): Promise<void> {
  await client.waitFor(
    `node ${name} to be Ready`,
    async () => {
      const n = await client.getOrUndefined(K.node, undefined, name);
      return n?.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True') ? true : undefined;
    },
    { timeoutMs },
  );
}
