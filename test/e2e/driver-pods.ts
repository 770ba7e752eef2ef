/**
 * Pod objects for the IPAM driver's allocations (control-plane/ipam-driver allocates for pods that have none), and
 * the check that goes with them. Restore puts back only allocations a running pod uses (src/restore/ipam-use.ts).
 */
import { expect } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { podsUsingAddresses, type AddressedPod } from './population-pods.js';
import { heldByLog, ipamCheck, readIpam, type DriverEvent } from './ipam-support.js';
import { expectPodAddressesHeld } from './pod-ip-support.js';

/** The IPAM driver's pod namespace (its --namespace default), which its allocations' attributes name. */
export const DRIVER_NS = 'ipam-churn';

/**
 * With a Pod object for each driver allocation (podsForDriverAllocations): every allocation the driver holds (`evs`)
 * is held by its handle alone, recorded once by it, nothing is held twice, no other pod handle holds anything, every
 * running pod's address is allocated to that pod (expectPodAddressesHeld), and `calicoctl ipam check` finds no problem (the driver's addresses are their pods', not leaks).
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
  // And from the pods' side (issue 29's check): no two pods share an address, every pod's address is its own.
  await expectPodAddressesHeld(client, held.size);
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
  await podsUsingAddresses(client, driverPods(evs, namespace));
}

/** Each allocation the IPAM driver holds (`evs`) as the pod it allocated for: its name, node, handle and address. */
export function driverPods(evs: DriverEvent[], namespace: string): AddressedPod[] {
  const held = heldByLog(evs);
  const assigned = new Map(evs.filter((e) => e.op === 'assign' && held.get(e.handle!) === e.ip).map((e) => [e.handle!, e]));
  return [...held].map(([handle, ip]) => {
    const e = assigned.get(handle)!;
    return { namespace, name: e.pod!, node: e.node!, handle, ip };
  });
}
