/**
 * Pod objects for the population's IPAM allocations (population.ts writes IPAMBlocks whose allocations name pods that
 * have no Pod object). Restore puts back only allocations a running pod uses (src/restore/ipam-use.ts), so a test that
 * wants the population's allocations restored gives them their pods, as the CNI plugin leaves a pod.
 */
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeObject } from '../../src/kube/types.js';
import { addressAt, parseCidr } from '../../src/doctor/ip.js';
import { until } from '../support/until.js';
import type { Population } from './population.js';

/** A pod the CNI plugin gave `ip` under IPAM handle `handle` (`k8s-pod-network.<containerID>`). */
export interface AddressedPod {
  namespace: string;
  name: string;
  node: string;
  handle: string;
  ip: string;
}

/** Every allocation of the population's IPAMBlocks, with the pod its attribute names. */
export function populationPods(population: Population): AddressedPod[] {
  const out: AddressedPod[] = [];
  for (const b of population.objects.filter((o) => o.kind === 'IPAMBlock')) {
    const cidr = parseCidr(b.spec.cidr)!;
    (b.spec.allocations as (number | null)[]).forEach((a, ordinal) => {
      if (a === null) return;
      const attr = b.spec.attributes[a] as { handle_id: string; secondary: { namespace: string; pod: string; node: string } };
      out.push({
        namespace: attr.secondary.namespace,
        name: attr.secondary.pod,
        node: attr.secondary.node,
        handle: attr.handle_id,
        ip: addressAt(cidr, ordinal),
      });
    });
  }
  return out;
}

/**
 * Each of `pods` as a Pod object the way the CNI plugin leaves it: bound to its node, the `cni.projectcalico.org/*`
 * annotations the plugin writes, and its address in the status (written once kwok has started it: kwok gives each
 * pod an address of its own). Waits until all run with their addresses.
 */
export async function podsUsingAddresses(client: KubeClient, pods: AddressedPod[]): Promise<void> {
  for (const ns of new Set(pods.map((p) => p.namespace)))
    await client.create(K.namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } }).catch(() => undefined);
  for (const p of pods) {
    await client.create(K.pod, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: p.name,
        namespace: p.namespace,
        annotations: {
          'cni.projectcalico.org/containerID': p.handle.slice('k8s-pod-network.'.length),
          'cni.projectcalico.org/podIP': `${p.ip}/32`,
          'cni.projectcalico.org/podIPs': `${p.ip}/32`,
        },
      },
      spec: { nodeName: p.node, containers: [{ name: 'c', image: 'nginx' }] },
    });
  }
  const want = new Map(pods.map((p) => [`${p.namespace}/${p.name}`, p.ip]));
  await until(
    `${pods.length} pods running with their IPAM addresses`,
    async () => {
      let ok = 0;
      for (const ns of new Set(pods.map((p) => p.namespace)))
        for (const p of await client.listAll<KubeObject>(K.pod, { namespace: ns })) {
          const ip = want.get(`${ns}/${p.metadata.name}`);
          if (!ip || p.status?.phase !== 'Running') continue;
          if (p.status?.podIP === ip) ok++;
          else await client.mergePatch(K.pod, ns, p.metadata.name, { status: { podIP: ip, podIPs: [{ ip }] } }, { subresource: 'status' });
        }
      return ok === want.size;
    },
    { timeoutMs: 120_000, intervalMs: 500 },
  );
}

/** A running Pod object for each of the population's allocations (populationPods). */
export async function podsForPopulation(client: KubeClient, population: Population): Promise<void> {
  await podsUsingAddresses(client, populationPods(population));
}
