/**
 * Calico's node side in the local cluster (src/dev/local-cluster/node-side.ts), run for real: Calico 3.28.1 installed
 * by the real v1.34.3 operator, then on each kwok node calico-node's own start-up (it writes the Calico Node) and
 * its tunnel-address allocator (it claims the node's VXLAN address from the operator's pool), and for a pod bound to
 * a kwok node the real `calico` CNI plugin with `calico-ipam`: ADD (refused while the datastore is locked, retried
 * until it is unlocked) in a network namespace the harness made, the
 * address in the pod's status (`kubectl get pod -o wide`), IPAM holding it for that pod; deleting the pod runs DEL,
 * which frees it; stopping the supervisor removes every namespace it made.
 */
import { describe, expect, it } from 'vitest';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject } from '../../src/kube/types.js';
import { listNetns, netnsPrefix } from '../../src/dev/local-cluster/netns.js';
import { calicoctl, installReal328, kubectl, waitPoolAndDatastoreReady, withRealCalico } from './calico-support.js';
import { ipamCheck } from './ipam-support.js';
import { expectPodAddressesHeld } from './pod-ip-support.js';
import { calicoType } from './helpers.js';

const real = withRealCalico('nside', { operators: ['v1.34.3'], calico: ['v3.28.1'], nodeSide: ['v3.28.1'] });
const NODES = ['nside-node-1', 'nside-node-2'];
const inPool = (ip: string | undefined) => !!ip && /^192\.168\.\d+\.\d+$/.test(ip);
/** A pod bound to a kwok node, which the node side gives its address through the CNI plugin. */
const podOn = (name: string, node: string) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: 'default' },
  spec: { nodeName: node, containers: [{ name: 'web', image: 'nginx' }] },
});
/** The address the CNI plugin gave the pod, once it is in its status. */
const waitPodIp = (client: KubeClient, name: string) =>
  client.waitFor(
    `${name} to get its address from the CNI plugin`,
    async () => {
      const pod = await client.getOrUndefined<KubeObject>(K.pod, 'default', name);
      return inPool(pod?.status?.podIP) ? (pod!.status.podIP as string) : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 500 },
  );

describe('the node side on the local cluster', () => {
  it('runs calico-node start-up and the tunnel allocator per node, and the CNI plugin per pod', async () => {
    const client = real.client();
    const cluster = real.cluster;
    await installReal328(client, cluster);
    await waitPoolAndDatastoreReady(client);

    // Start-up done and the allocator running on both nodes (the supervisor's status, as `cluster status` prints it).
    await client.waitFor(
      'start-up done and the tunnel allocator running on both nodes',
      async () => {
        const nodes = cluster.calicoStatus()?.nodeSide?.nodes ?? {};
        return NODES.every((n) => nodes[n]?.startup === 'done' && nodes[n]?.allocator?.pid) ? true : undefined;
      },
      { timeoutMs: 300_000, intervalMs: 1000 },
    );

    // The Calico Nodes written by start-up, each with the VXLAN tunnel address its allocator claimed (3.28.1's
    // custom-resources.yaml asks for VXLANCrossSubnet), held in IPAM as that node's tunnel address.
    const tunnels = await client.waitFor(
      'a VXLAN tunnel address on both Calico Nodes',
      async () => {
        const list = JSON.parse(await calicoctl(['get', 'nodes', '-o', 'json']));
        const byName = new Map<string, any>((list.items ?? []).map((n: any) => [n.metadata.name, n]));
        const addrs = NODES.map((n) => byName.get(n)?.spec?.ipv4VXLANTunnelAddr as string | undefined);
        return addrs.every(inPool) ? (addrs as string[]) : undefined;
      },
      { timeoutMs: 180_000, intervalMs: 1000 },
    );
    const nodes = JSON.parse(await calicoctl(['get', 'nodes', '-o', 'json'])).items.filter((n: any) => NODES.includes(n.metadata.name));
    expect(nodes.map((n: any) => n.spec.bgp?.ipv4Address).sort()).toEqual(expect.arrayContaining([expect.stringMatching(/^127\.0\.1\.\d+\/32$/)]));
    for (const [i, ip] of tunnels.entries()) {
      const show = await calicoctl(['ipam', 'show', `--ip=${ip}`]);
      expect(show).toMatch(/is in use/);
      expect(show).toContain(`node: ${NODES[i]}`);
      expect(show).toContain('type: vxlanTunnelAddress');
    }

    // A pod on a kwok node while the datastore is locked (what restore does): the plugin refuses the ADD, and the
    // harness retries it as a kubelet does until the lock is lifted. Then the CNI plugin's address is in the pod's
    // status and held in IPAM for that pod.
    const CI = calicoType('clusterinformations', 'ClusterInformation');
    await client.mergePatch(CI, undefined, 'default', { spec: { datastoreReady: false } });
    await client.create(K.pod, podOn('nside-web', NODES[0]!));
    await client.waitFor(
      'the ADD to be refused under the lock',
      async () => (/not ready to process requests/.test(cluster.calicoStatus()?.nodeSide?.pods['default/nside-web']?.error ?? '') ? true : undefined),
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    expect(inPool((await client.get<KubeObject>(K.pod, 'default', 'nside-web')).status?.podIP)).toBe(false);
    await client.mergePatch(CI, undefined, 'default', { spec: { datastoreReady: true } });
    const podIp = await waitPodIp(client, 'nside-web');
    expect(await kubectl(cluster, ['get', 'pod', 'nside-web', '-n', 'default', '-o', 'wide'])).toContain(podIp);
    const pod = await client.get<KubeObject>(K.pod, 'default', 'nside-web');
    // The plugin's own record on the pod (what kube-controllers' IPAM garbage collection reads).
    expect(pod.metadata.annotations?.['cni.projectcalico.org/podIP']).toBe(`${podIp}/32`);
    const held = await calicoctl(['ipam', 'show', `--ip=${podIp}`]);
    expect(held).toMatch(/is in use/);
    expect(held).toMatch(/pod: nside-web/);
    // A second pod, on the other node, that stays: the check after the DEL below judges it, not only the operator's.
    await client.create(K.pod, podOn('nside-kept', NODES[1]!));
    const keptIp = await waitPodIp(client, 'nside-kept');
    const podNetns = cluster.calicoStatus()?.nodeSide?.pods['default/nside-web']?.netns;
    expect(podNetns).toMatch(new RegExp(`^${netnsPrefix(cluster.name)}p-`));
    expect(listNetns(netnsPrefix(cluster.name))).toContain(podNetns);
    // No two pods share an address and each running pod's is held by its own handle: this pod's and the operator's
    // (kube-controllers, addressed by the same plugin, unless its ADD still waits behind the lock).
    expect((await expectPodAddressesHeld(client, 2)).map((a) => a.ip)).toEqual(expect.arrayContaining([podIp, keptIp]));

    // Deleting the pod runs DEL: the address is free again and the pod's namespace is gone.
    await client.delete(K.pod, 'default', 'nside-web');
    await client.waitFor(
      'DEL to free the address and remove the namespace',
      async () => {
        const show = await calicoctl(['ipam', 'show', `--ip=${podIp}`]);
        return !/is in use/.test(show) && !listNetns(netnsPrefix(cluster.name)).includes(podNetns!) ? true : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 1000 },
    );
    const check = await ipamCheck();
    expect(check.problems, check.text).toBe(0);
    // After the DEL: the pods left (nside-kept and the operator's) still hold their addresses, none has the freed one.
    const after = (await expectPodAddressesHeld(client, 1)).map((a) => a.ip);
    expect(after).toContain(keptIp);
    expect(after).not.toContain(podIp);
    await client.delete(K.pod, 'default', 'nside-kept');

    // Stopping the supervisor removes every namespace the node side made (nodes' and pods').
    await cluster.stopCalico();
    expect(listNetns(netnsPrefix(cluster.name))).toEqual([]);
  }, 900_000);
});
