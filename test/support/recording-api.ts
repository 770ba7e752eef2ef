/**
 * A fake API server for unit tests that count requests: the real KubeClient's methods (get, paging, metadata lists)
 * over a `request` that answers reads from the objects given and records each one as `GET <path>`. Anything else
 * (a write, discovery it does not hold) fails, so a test sees it. Objects are found by the path the client asks
 * for: `/apis/<group>/<version>[/namespaces/<ns>]/<plural>/<name>`.
 */
import { KubeApiError, KubeClient } from '../../src/kube/client.js';
import type { KubeObject } from '../../src/kube/types.js';

export interface RecordingApi {
  client: KubeClient;
  /** Every request, in order: `GET /apis/apps/v1/namespaces/kube-system/daemonsets/calico-node`. */
  requests: string[];
  /** How many times `path` was requested. */
  count(path: string): number;
  /** The paths requested more than once. */
  repeated(): string[];
}

/** The path an object is read at, from its apiVersion, kind's plural (given: it is not derivable) and metadata. */
export function objectPath(obj: KubeObject, plural: string): string {
  const base = obj.apiVersion.includes('/') ? `/apis/${obj.apiVersion}` : `/api/${obj.apiVersion}`;
  return `${base}${obj.metadata.namespace ? `/namespaces/${obj.metadata.namespace}` : ''}/${plural}/${obj.metadata.name}`;
}

/** `objects`: path -> object (objectPath); `lists`: collection path -> items (any other list is empty). */
export function recordingApi(objects: Record<string, KubeObject>, lists: Record<string, KubeObject[]> = {}): RecordingApi {
  const requests: string[] = [];
  const client = Object.create(KubeClient.prototype) as KubeClient;
  Object.assign(client, {
    connection: { clusterName: 'recorded', server: 'https://127.0.0.1:1' },
    stats: { requests: 0, retries: 0, throttled: 0 },
    async request(method: string, path: string) {
      requests.push(`${method} ${path}`);
      if (method !== 'GET') throw new Error(`unexpected ${method} ${path}`);
      if (path === '/version') return { gitVersion: 'v1.31.0', major: '1', minor: '31' };
      const obj = objects[path];
      if (obj) return structuredClone(obj);
      // A collection is a path whose last part is a plural: /apis/<g>/<v>/<plural>, /api/v1/<plural>, .../namespaces/<ns>/<plural>.
      const parts = path.split('/').filter(Boolean);
      const isList =
        parts[0] === 'api'
          ? parts.length === 3 || (parts.length === 5 && parts[2] === 'namespaces')
          : parts.length === 4 || (parts[3] === 'namespaces' && parts.length === 6);
      if (isList) return { items: structuredClone(lists[path] ?? []), metadata: {} };
      throw new KubeApiError(404, 'NotFound', `${path} not found`, method, path);
    },
  });
  return {
    client,
    requests,
    count: (path) => requests.filter((r) => r === `GET ${path}`).length,
    repeated: () => [...new Set(requests.filter((r, i) => requests.indexOf(r) !== i))],
  };
}

/**
 * An operator install of Calico v3.28.1 (tigera/operator v1.34.3, as its tigera-operator.yaml names it) that a Flux
 * Kustomization reconciles: the labels kustomize-controller puts on what it applies, and the Kustomization itself,
 * not suspended (self-healing). By path, for recordingApi.
 */
export function fluxOwnedOperatorInstall(): Record<string, KubeObject> {
  const objects: [KubeObject, string][] = [
    [
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: {
          name: 'tigera-operator',
          namespace: 'tigera-operator',
          labels: { 'kustomize.toolkit.fluxcd.io/name': 'calico', 'kustomize.toolkit.fluxcd.io/namespace': 'flux-system' },
        },
        spec: { replicas: 1, template: { spec: { containers: [{ name: 'tigera-operator', image: 'quay.io/tigera/operator:v1.34.3' }] } } },
      },
      'deployments',
    ],
    [{ apiVersion: 'operator.tigera.io/v1', kind: 'Installation', metadata: { name: 'default' }, spec: { variant: 'Calico' } }, 'installations'],
    [
      {
        apiVersion: 'apps/v1',
        kind: 'DaemonSet',
        metadata: { name: 'calico-node', namespace: 'calico-system' },
        spec: { template: { spec: { containers: [{ name: 'calico-node', image: 'docker.io/calico/node:v3.28.1' }] } } },
      },
      'daemonsets',
    ],
    [
      { apiVersion: 'crd.projectcalico.org/v1', kind: 'ClusterInformation', metadata: { name: 'default' }, spec: { calicoVersion: 'v3.28.1' } },
      'clusterinformations',
    ],
    [
      {
        apiVersion: 'kustomize.toolkit.fluxcd.io/v1',
        kind: 'Kustomization',
        metadata: { name: 'calico', namespace: 'flux-system' },
        spec: { interval: '10m', path: './calico' },
      },
      'kustomizations',
    ],
    [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'kube-system', uid: '5d3c1f4e-0000-4000-8000-000000000001' } }, 'namespaces'],
  ];
  return Object.fromEntries(objects.map(([o, plural]) => [objectPath(o, plural), o]));
}

/** The paths apply's and plan's checks read the objects of an install at (calico-objects.ts) and the owner above. */
export const INSTALL_PATHS = {
  installation: '/apis/operator.tigera.io/v1/installations/default',
  operator: '/apis/apps/v1/namespaces/tigera-operator/deployments/tigera-operator',
  calicoNodeSystem: '/apis/apps/v1/namespaces/calico-system/daemonsets/calico-node',
  calicoNodeKube: '/apis/apps/v1/namespaces/kube-system/daemonsets/calico-node',
  calicoConfig: '/api/v1/namespaces/kube-system/configmaps/calico-config',
  canal: '/apis/apps/v1/namespaces/kube-system/daemonsets/canal',
  kustomization: '/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations/calico',
} as const;
