/**
 * Pod objects for the IPAM driver's allocations (control-plane/ipam-driver allocates for pods that have none), and
 * the check that goes with them. Restore puts back only allocations a running pod uses (src/restore/ipam-use.ts).
 */
import { expect } from 'vitest';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject } from '../../src/kube/types.js';
import { until } from '../support/until.js';
import { heldByLog, ipamCheck, readIpam, type DriverEvent } from './ipam-support.js';

/** The IPAM driver's pod namespace (its --namespace default), which its allocations' attributes name. */
export const DRIVER_NS = 'ipam-churn';

/**
 * With a Pod object for each driver allocation (podsForDriverAllocations): every allocation the driver holds (`evs`)
 * is held by its handle alone, recorded once by it, nothing is held twice, no other pod handle holds anything, and
 * `calicoctl ipam check` finds no problem (the driver's addresses are their pods', not leaks).
 */
export async function expectDriverPodsIntact(client: KubeClient, evs: DriverEvent[]): Promise<void> {
  const held = heldByLog(evs);
  const ipam = await readIpam(client);
  const lost: string[] = [];
  for (const [handle, ip] of held) {
    const owners = ipam.owners.get(ip) ?? [];
    if (owners.length !== 1 || owners[0] !== handle) lost.push(`${ip} of ${handle}: allocated to ${owners.join(', ') || 'nobody'}`);
    const recorded = Object.values(ipam.handles.get(handle) ?? {}).reduce((a, n) => a + n, 0);
    if (recorded !== 1) lost.push(`IPAMHandle ${handle} records ${recorded} addresses, not 1`);
  }
  expect(lost).toEqual([]);
  expect([...ipam.owners].filter(([, o]) => o.length > 1)).toEqual([]);
  const podHandles = [...ipam.owners.values()].flat().filter((h) => h.startsWith('k8s-pod-network.'));
  expect(podHandles.sort()).toEqual([...held.keys()].sort());
  const check = await ipamCheck();
  expect(
    { leaked: check.leaked, noAllocation: check.noAllocation, handlesWithoutIps: check.handlesWithoutIps, missingHandles: check.missingHandles },
    check.text,
  ).toEqual({ leaked: 0, noAllocation: 0, handlesWithoutIps: 0, missingHandles: 0 });
}

/**
 * A Pod object for each allocation the IPAM driver holds (`evs`), as the CNI plugin leaves a pod: bound to the node
 * the driver allocated on, the `cni.projectcalico.org/*` annotations the plugin writes, and the address in its status
 * (written once kwok has started it, as the node-side harness writes Calico's address). The driver allocates for pods
 * that have no Pod object; restore puts back only allocations a running pod uses (src/restore/ipam-use.ts), so a test
 * that wants the driver's allocations restored gives them their pods.
 */
export async function podsForDriverAllocations(client: KubeClient, evs: DriverEvent[], namespace: string): Promise<void> {
  await client.create(K.namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } }).catch(() => undefined);
  const held = heldByLog(evs);
  const assigned = new Map(evs.filter((e) => e.op === 'assign' && held.get(e.handle!) === e.ip).map((e) => [e.handle!, e]));
  for (const [handle, ip] of held) {
    const e = assigned.get(handle)!;
    await client.create(K.pod, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: e.pod!,
        namespace,
        annotations: {
          'cni.projectcalico.org/containerID': handle.slice('k8s-pod-network.'.length),
          'cni.projectcalico.org/podIP': `${ip}/32`,
          'cni.projectcalico.org/podIPs': `${ip}/32`,
        },
      },
      spec: { nodeName: e.node, containers: [{ name: 'c', image: 'nginx' }] },
    });
  }
  const names = new Map([...assigned.values()].map((e) => [e.pod!, held.get(e.handle!)!]));
  // kwok starts each pod with an address of its own: the driver's goes into the status once it has.
  await until(
    `${names.size} driver pods running with their driver addresses`,
    async () => {
      let ok = 0;
      for (const p of await client.listAll<KubeObject>(K.pod, { namespace })) {
        const want = names.get(p.metadata.name);
        if (!want || p.status?.phase !== 'Running') continue;
        if (p.status?.podIP === want) ok++;
        else await client.mergePatch(K.pod, namespace, p.metadata.name, { status: { podIP: want, podIPs: [{ ip: want }] } }, { subresource: 'status' });
      }
      return ok === names.size;
    },
    { timeoutMs: 120_000, intervalMs: 500 },
  );
}
