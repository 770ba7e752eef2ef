/**
 * Calico on the etcd datastore in the local cluster, run by Calico's real programs (issue 31's harness):
 * calico-etcd.yaml of 3.28.1 installed with calico-config pointing at the cluster's TLS Calico etcd and its
 * certificates in the Secret; then calico-node's start-up in etcd mode writes each node's Calico Node and the
 * default pool into etcd, its tunnel allocator claims each node's IPIP address there, and the CNI plugin in etcd
 * mode gives a pod its address and writes its WorkloadEndpoint. The Kubernetes API holds no Calico CRD: the data
 * really is in etcd (read with calicoctl in etcd mode and through etcd's own JSON gateway).
 */
import { describe, expect, it } from 'vitest';
import { K } from '../../src/kube/builtin.js';
import type { KubeObject } from '../../src/kube/types.js';
import { etcdRange } from '../../src/dev/local-cluster/calico-etcd.js';
import { withCalicoOnEtcd } from './etcd-cluster-support.js';

const real = withCalicoOnEtcd('etcdc');
/** calico-etcd.yaml leaves CALICO_IPV4POOL_CIDR commented out: start-up's default pool is 192.168.0.0/16. */
const inPool = (ip: string | undefined) => !!ip && /^192\.168\.\d+\.\d+$/.test(ip);

describe('Calico on the etcd datastore in the local cluster', () => {
  it('runs start-up, the tunnel allocator and the CNI plugin in etcd mode, writing only to etcd', async () => {
    const client = real.client();
    const etcd = real.etcd();
    expect(real.cluster.calicoEtcd()).toEqual(etcd);
    expect(etcd.endpoint).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);

    await client.waitFor(
      'start-up done and the tunnel allocator running on both nodes, kube-controllers running',
      async () => {
        const st = real.cluster.calicoStatus();
        const nodes = st?.nodeSide?.nodes ?? {};
        return real.nodes.every((n) => nodes[n]?.startup === 'done' && nodes[n]?.allocator?.pid) && st?.kubeControllers?.pid ? true : undefined;
      },
      { timeoutMs: 300_000, intervalMs: 1000, state: async () => JSON.stringify(real.cluster.calicoStatus() ?? 'no supervisor status') },
    );

    // Start-up wrote each node's Calico Node and the default pool, and the allocator each node's IPIP address
    // (calico-etcd.yaml: CALICO_IPV4POOL_IPIP Always), all in etcd.
    const tunnels = await client.waitFor(
      'an IPIP tunnel address on both Calico Nodes',
      async () => {
        const byName = new Map<string, any>(JSON.parse(await real.calicoctl(['get', 'nodes', '-o', 'json'])).items.map((n: any) => [n.metadata.name, n]));
        const addrs = real.nodes.map((n) => byName.get(n)?.spec?.bgp?.ipv4IPIPTunnelAddr as string | undefined);
        return addrs.every(inPool) ? (addrs as string[]) : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 1000 },
    );
    const pools = await real.calicoctl(['get', 'ippools', '-o', 'yaml']);
    expect(pools).toContain('name: default-ipv4-ippool');
    expect(pools).toContain('cidr: 192.168.0.0/16');
    expect(pools).toContain('ipipMode: Always');
    for (const [i, ip] of tunnels.entries()) {
      const show = await real.calicoctl(['ipam', 'show', `--ip=${ip}`]);
      expect(show).toMatch(/is in use/);
      expect(show).toContain(`node: ${real.nodes[i]}`);
      expect(show).toContain('type: ipipTunnelAddress');
    }

    // A pod on a kwok node: the CNI plugin in etcd mode (calico-ipam from etcd's pool) gives it its address.
    await client.create(K.pod, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'etcdc-web', namespace: 'default' },
      spec: { nodeName: real.nodes[0], containers: [{ name: 'web', image: 'nginx' }] },
    });
    const podIp = await client.waitFor(
      'etcdc-web to get its address from the CNI plugin',
      async () => {
        const ip = (await client.getOrUndefined<KubeObject>(K.pod, 'default', 'etcdc-web'))?.status?.podIP;
        return inPool(ip) ? (ip as string) : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 500, state: async () => JSON.stringify(real.cluster.calicoStatus()?.nodeSide?.pods ?? {}) },
    );
    const weps = JSON.parse(await real.calicoctl(['get', 'workloadendpoints', '-n', 'default', '-o', 'json'])).items;
    const wep = weps.find((w: any) => w.spec?.pod === 'etcdc-web');
    expect(wep?.spec?.ipNetworks).toEqual([`${podIp}/32`]);
    expect(wep?.spec?.node).toBe(real.nodes[0]);
    // The same allocation as etcd keeps it, read without any Calico program: the pod's IPAM handle under /calico/ipam/v2/.
    const handles = await etcdRange(etcd, '/calico/ipam/v2/handle/');
    expect(handles.map((h) => h.key)).toEqual(expect.arrayContaining([expect.stringMatching(/^\/calico\/ipam\/v2\/handle\/k8s-pod-network\.[0-9a-f]{64}$/)]));
    expect((await etcdRange(etcd, '/calico/resources/v3/projectcalico.org/nodes/')).map((n) => n.key)).toEqual(
      expect.arrayContaining(real.nodes.map((n) => `/calico/resources/v3/projectcalico.org/nodes/${n}`)),
    );

    // The Kubernetes API has no Calico CRD, so no Calico object can be stored there.
    const calicoCrds = (await client.listAll(K.crd)).filter((c) => /projectcalico\.org$/.test(c.spec.group));
    expect(calicoCrds.map((c) => c.metadata.name)).toEqual([]);

    // DEL through the plugin in etcd mode frees the address.
    await client.delete(K.pod, 'default', 'etcdc-web');
    await client.waitFor(
      'DEL to free the address',
      async () => (/is in use/.test(await real.calicoctl(['ipam', 'show', `--ip=${podIp}`])) ? undefined : true),
      { timeoutMs: 120_000, intervalMs: 1000 },
    );
  }, 600_000);
});
