import { describe, expect, it } from 'vitest';
import type { KubeClient } from '../kube/client.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import { etcdInstallInPlace } from './migrate-steps.js';

/** The three objects a rollback looks at, as a client would return them (plural/name -> object). */
function clientWith(objs: Record<string, KubeObject | undefined>): KubeClient {
  return { getOrUndefined: async (t: ResourceType, _ns: string | undefined, name: string) => objs[`${t.plural}/${name}`] } as unknown as KubeClient;
}
const workload = (env: string[]) => ({ spec: { template: { spec: { containers: [{ name: 'c', env: env.map((name) => ({ name })) }] } } } }) as KubeObject;
const etcdInstall = {
  'configmaps/calico-config': { data: { etcd_endpoints: 'https://10.0.0.1:2379' } } as unknown as KubeObject,
  'daemonsets/calico-node': workload(['DATASTORE_TYPE', 'ETCD_ENDPOINTS']),
  'deployments/calico-kube-controllers': workload(['ETCD_ENDPOINTS']),
};

describe('a rollback leaves calico-etcd.yaml alone when calico.yaml never went in', () => {
  it('only when calico-config, calico-node and kube-controllers all still point at etcd', async () => {
    expect(await etcdInstallInPlace(clientWith(etcdInstall))).toBe(true);
    // Killed half-way through calico.yaml: one of them already on the Kubernetes datastore.
    expect(await etcdInstallInPlace(clientWith({ ...etcdInstall, 'configmaps/calico-config': { data: {} } as unknown as KubeObject }))).toBe(false);
    expect(await etcdInstallInPlace(clientWith({ ...etcdInstall, 'daemonsets/calico-node': workload(['DATASTORE_TYPE']) }))).toBe(false);
    expect(await etcdInstallInPlace(clientWith({ ...etcdInstall, 'deployments/calico-kube-controllers': undefined }))).toBe(false);
  });
});
