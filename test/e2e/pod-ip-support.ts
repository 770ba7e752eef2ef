/**
 * The check every IPAM-touching test ends with (issue 29): no two running pods share an address, and every running
 * pod whose address Calico gave (the CNI plugin's `cni.projectcalico.org/podIP` annotation) or that lies in an IP
 * pool is allocated in IPAM to that pod's own handle (`k8s-pod-network.<containerID>`, as the CNI plugin names it).
 * A pod whose address IPAM considers free is the harm restore exists to prevent: the next pod gets the same address.
 *
 * Written from the pods and the IPAMBlocks as stored, not with cni-rewind's own doctor code, so the product's
 * `pod-ip-not-allocated` check is judged by an independent reading.
 */
import { expect } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeObject } from '../../src/kube/types.js';
import { judgePodAddresses, podAddresses, type PodAddress } from '../support/pod-addresses.js';
import { calicoType } from './helpers.js';
import { readIpam } from './ipam-support.js';

const IPPOOL = calicoType('ippools', 'IPPool');

/** Reads the pods, the pools and IPAM as stored and judges them (see judgePodAddresses). */
export async function podAddressProblems(client: KubeClient): Promise<{ problems: string[]; judged: number; addrs: PodAddress[] }> {
  const addrs = podAddresses(await client.listAll<KubeObject>(K.pod));
  const pools = (await client.listAll(IPPOOL).catch(() => [])).map((p) => p.spec?.cidr as string).filter(Boolean);
  const { owners } = await readIpam(client);
  return { ...judgePodAddresses(addrs, owners, pools), addrs };
}

/**
 * Fails the test when two pods share an address or a running pod's Calico address is not allocated to it. `atLeast`:
 * how many addresses the caller expects to be judged (a check over no pod proves nothing).
 */
export async function expectPodAddressesHeld(client: KubeClient, atLeast: number): Promise<PodAddress[]> {
  const { problems, judged, addrs } = await podAddressProblems(client);
  expect(problems).toEqual([]);
  expect(judged, `pods with a Calico address: ${JSON.stringify(addrs)}`).toBeGreaterThanOrEqual(atLeast);
  return addrs;
}
