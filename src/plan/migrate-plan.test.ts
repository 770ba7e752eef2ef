import { describe, expect, it } from 'vitest';
import { forwardEdits } from './migrate-plan.js';
import { k8sNodeName, refuseNodesWithoutK8sRef } from './migrate-nodes.js';
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

describe("a Calico Node's name in the Kubernetes datastore (calicoctl's export takes its last 'k8s' orchestrator reference)", () => {
  it('is the k8s reference; none (a host that is no Kubernetes node) or another orchestrator only gives none', () => {
    expect(k8sNodeName({ spec: { orchRefs: [{ orchestrator: 'k8s', nodeName: 'worker-1' }] } })).toBe('worker-1');
    expect(k8sNodeName({ spec: { orchRefs: [{ orchestrator: 'openstack', nodeName: 'vm-1' }] } })).toBeUndefined();
    expect(k8sNodeName({ spec: {} })).toBeUndefined();
    expect(k8sNodeName(undefined)).toBeUndefined();
  });
  it('a Node without one refuses the migration by name (exit 5); one to a missing Kubernetes node does not', () => {
    expect(() => refuseNodesWithoutK8sRef({ withoutK8sRef: ['bare-metal-1'], toMissingK8sNodes: [], nodes: 3 }, 'no plan was made')).toThrow(
      /bare-metal-1 in etcd have no 'k8s' orchestrator reference.*no plan was made/,
    );
    expect(() => refuseNodesWithoutK8sRef({ withoutK8sRef: [], toMissingK8sNodes: ['old -> gone'], nodes: 3 }, 'x')).not.toThrow();
  });
});
