import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../../kube/types.js';
import { cniPluginConfig, nodeAddresses, nodeSideEnv, podsForCni, resolveEnv, wantedNodeSides } from './node-side-desired.js';
import { nodeSideFor } from './calico-programs.js';

// The shape of the operator's calico-node pod (v1.34: install-cni reads the config from ConfigMap cni-config).
const operatorConfig = JSON.stringify({
  name: 'k8s-pod-network',
  cniVersion: '0.3.1',
  plugins: [
    {
      type: 'calico',
      datastore_type: 'kubernetes',
      mtu: 0,
      log_file_path: '/var/log/calico/cni/cni.log',
      ipam: { type: 'calico-ipam', assign_ipv4: 'true', assign_ipv6: 'false' },
      policy: { type: 'k8s' },
      kubernetes: { kubeconfig: '__KUBECONFIG_FILEPATH__' },
    },
    { type: 'bandwidth', capabilities: { bandwidth: true } },
    { type: 'portmap', snat: true, capabilities: { portMappings: true } },
  ],
});

const calicoNodePod = (node: string | undefined, extra: Partial<KubeObject['metadata']> = {}): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: `calico-node-${node}`, namespace: 'calico-system', uid: `uid-${node}`, ...extra },
  spec: {
    nodeName: node,
    hostNetwork: true,
    initContainers: [
      {
        name: 'install-cni',
        env: [{ name: 'CNI_NETWORK_CONFIG', valueFrom: { configMapKeyRef: { name: 'cni-config', key: 'config' } } }],
      },
    ],
    containers: [
      {
        name: 'calico-node',
        image: 'docker.io/calico/node:v3.28.1',
        env: [
          { name: 'NODENAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
          { name: 'CALICO_NETWORKING_BACKEND', value: 'bird' },
          { name: 'IP', value: 'autodetect' },
          { name: 'IP_AUTODETECTION_METHOD', value: 'first-found' },
          { name: 'NO_DEFAULT_POOLS', value: 'true' },
          { name: 'KUBERNETES_SERVICE_HOST', value: '10.96.0.1' },
          { name: 'FELIX_TYPHAK8SSERVICENAME', value: 'calico-typha' },
          { name: 'SECRET', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } },
        ],
      },
    ],
  },
});

const lookup = (ns: string, name: string, key: string) => (ns === 'calico-system' && name === 'cni-config' && key === 'config' ? operatorConfig : undefined);

describe('wantedNodeSides', () => {
  it('reads node, pod, tag, env and CNI config from each bound calico-node pod', () => {
    const [w, ...rest] = wantedNodeSides(
      [calicoNodePod('n1'), calicoNodePod(undefined), calicoNodePod('n2', { deletionTimestamp: '2026-01-01T00:00:00Z' })],
      lookup,
    );
    expect(rest).toEqual([]);
    expect(w).toMatchObject({ node: 'n1', podUid: 'uid-n1', tag: 'v3.28.1', cniTemplate: operatorConfig });
    expect(w!.env).toMatchObject({ NODENAME: 'n1', NO_DEFAULT_POOLS: 'true', IP: 'autodetect' });
    // A Secret is never read into the node side's environment.
    expect(w!.env).not.toHaveProperty('SECRET');
  });
  it('resolves a ConfigMap key the way calico.yaml passes CALICO_NETWORKING_BACKEND', () => {
    const env = [{ name: 'CALICO_NETWORKING_BACKEND', valueFrom: { configMapKeyRef: { name: 'calico-config', key: 'calico_backend' } } }];
    expect(
      resolveEnv(env, 'kube-system', 'n1', (ns, n, k) => (ns === 'kube-system' && n === 'calico-config' && k === 'calico_backend' ? 'vxlan' : undefined)),
    ).toEqual({
      CALICO_NETWORKING_BACKEND: 'vxlan',
    });
  });
});

describe('nodeSideEnv', () => {
  it("takes the node's address from its Node object and keeps files in the node's directory", () => {
    const [w] = wantedNodeSides([calicoNodePod('n1')], lookup);
    const env = nodeSideEnv(w!, '/k/kubeconfig', '/w/n1', '127.0.1.1');
    expect(env).toMatchObject({
      NODENAME: 'n1',
      KUBECONFIG: '/k/kubeconfig',
      DATASTORE_TYPE: 'kubernetes',
      IP: '127.0.1.1',
      CALICO_NODENAME_FILE: '/w/n1/nodename',
      CALICO_DISABLE_FILE_LOGGING: 'true',
      NO_DEFAULT_POOLS: 'true',
    });
    expect(env).not.toHaveProperty('KUBERNETES_SERVICE_HOST');
    // No Typha runs: the tunnel allocator must use its local syncer.
    expect(env).not.toHaveProperty('FELIX_TYPHAK8SSERVICENAME');
  });
});

describe('nodeAddresses', () => {
  it("is the node's InternalIP, else a loopback address by its place among the nodes", () => {
    const node = (name: string, addresses?: unknown[]): KubeObject => ({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name },
      status: addresses ? { addresses } : {},
    });
    const got = nodeAddresses([
      node('b'),
      node('a'),
      node('c', [
        { type: 'Hostname', address: 'c' },
        { type: 'InternalIP', address: '10.0.0.7' },
      ]),
    ]);
    expect(Object.fromEntries(got)).toEqual({ a: '127.0.1.1', b: '127.0.1.2', c: '10.0.0.7' });
  });
});

describe('cniPluginConfig', () => {
  it("is the calico plugin of the rendered conflist, for this node and this cluster's kubeconfig", () => {
    const [w] = wantedNodeSides([calicoNodePod('n1')], lookup);
    expect(cniPluginConfig(w!, '/k/kubeconfig', '/w/cni.log', '/w/status')).toEqual({
      type: 'calico',
      cniVersion: '0.3.1',
      name: 'k8s-pod-network',
      nodename: 'n1',
      nodename_file_optional: true,
      datastore_type: 'kubernetes',
      mtu: 0,
      log_file_path: '/w/cni.log',
      ipam: { type: 'calico-ipam', assign_ipv4: 'true', assign_ipv6: 'false' },
      policy: { type: 'k8s' },
      kubernetes: { kubeconfig: '/k/kubeconfig' },
    });
  });
  it("fills calico.yaml's placeholders", () => {
    const manifest = `{"name":"k8s-pod-network","cniVersion":"0.3.1","plugins":[{"type":"calico","nodename":"__KUBERNETES_NODE_NAME__","mtu":__CNI_MTU__,"ipam":{"type":"calico-ipam"},"kubernetes":{"kubeconfig":"__KUBECONFIG_FILEPATH__"}}]}`;
    const conf = cniPluginConfig({ node: 'n2', podUid: 'u', tag: 'v3.27.4', env: {}, cniTemplate: manifest, cniMtu: '1450' }, '/k', '/l', '/s');
    expect(conf).toMatchObject({ nodename: 'n2', mtu: 1450, kubernetes: { kubeconfig: '/k' } });
  });
  it('says which node has no config', () => {
    expect(() => cniPluginConfig({ node: 'n3', podUid: 'u', tag: 'v3.28.1', env: {} }, '/k', '/l', '/s')).toThrow(/calico-node pod on n3 has no install-cni/);
  });
});

describe('podsForCni', () => {
  const pod = (name: string, node: string, extra: Record<string, unknown> = {}): KubeObject => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'default', uid: name },
    spec: { nodeName: node, ...extra },
    status: { phase: 'Running' },
  });
  it('takes running pods on ready nodes, never host-network ones', () => {
    const pending = pod('pending', 'n1');
    pending.status = { phase: 'Pending' };
    const got = podsForCni([pod('a', 'n1'), pod('b', 'n2'), pod('host', 'n1', { hostNetwork: true }), pending], new Set(['n1']));
    expect(got.map((p) => p.metadata.name)).toEqual(['a']);
  });
});

describe('nodeSideFor', () => {
  it("runs each installed minor's node side from its own tree, 3.27 from 3.27.4's", () => {
    expect(nodeSideFor('v3.27.4')).toBe('v3.27.4');
    expect(nodeSideFor('v3.27.0')).toBe('v3.27.4');
    expect(nodeSideFor('v3.28.4')).toBe('v3.28.1');
    // A release pinned in calico-releases.pins runs its own tree, a vendor suffix included.
    expect(nodeSideFor('v3.28.5')).toBe('v3.28.5');
    expect(nodeSideFor('v3.26.5-gke.2')).toBe('v3.26.5');
    expect(nodeSideFor('v3.29.7')).toBe('v3.29.7');
    expect(nodeSideFor('v3.30.2')).toBe('v3.30.7');
    expect(nodeSideFor('v3.31.7')).toBe('v3.31.7');
    expect(nodeSideFor('v3.32.1')).toBe('v3.32.1');
  });
  it('names no tree for a minor with no pin, or no tag', () => {
    expect(nodeSideFor('v3.26.4')).toBeUndefined();
    expect(nodeSideFor('v3.33.0')).toBeUndefined();
    expect(nodeSideFor(undefined)).toBeUndefined();
  });
});
