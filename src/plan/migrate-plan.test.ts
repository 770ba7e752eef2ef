import { describe, expect, it } from 'vitest';
import { forwardEdits } from './migrate-plan.js';
import type { ManifestTransform } from './types.js';

describe('the edits a migration carries from calico-etcd.yaml into calico.yaml', () => {
  const found: ManifestTransform = {
    from: 'v3.28.1',
    calicoNodeEnv: {
      set: [
        { name: 'CALICO_IPV4POOL_CIDR', value: '10.244.0.0/16' },
        { name: 'ETCD_ENDPOINTS', valueFrom: { configMapKeyRef: { name: 'calico-config', key: 'etcd_endpoints' } } },
        { name: 'DATASTORE_TYPE', value: 'etcdv3' },
      ],
      remove: ['ETCD_KEY_FILE', 'FELIX_HEALTHENABLED'],
    },
    calicoConfig: { etcd_endpoints: 'https://10.0.0.1:2379', etcd_ca: '/calico-secrets/etcd-ca', veth_mtu: '1440' },
    repositories: { 'docker.io/calico/node': 'registry.local/calico/node' },
  };
  it("keep the install's own settings (pool, MTU, mirror, a removed env) and drop every etcd setting", () => {
    const f = forwardEdits(found);
    expect(f.calicoNodeEnv.set.map((e) => e.name)).toEqual(['CALICO_IPV4POOL_CIDR']);
    expect(f.calicoNodeEnv.remove).toEqual(['FELIX_HEALTHENABLED']);
    expect(f.calicoConfig).toEqual({ veth_mtu: '1440' });
    expect(f.repositories).toEqual(found.repositories);
  });
  it('the rollback keeps them all (they are what put calico-node back on etcd)', () => {
    forwardEdits(found);
    expect(found.calicoConfig.etcd_endpoints).toBe('https://10.0.0.1:2379');
    expect(found.calicoNodeEnv.set).toHaveLength(3);
  });
});
