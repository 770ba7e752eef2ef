/**
 * What the datastore migration tests read on the Kubernetes side (etcd-datastore.test.ts): Calico's copy in the
 * crd.projectcalico.org CRDs, its ClusterInformation lock, who holds each address in its IPAM blocks.
 */
import { readFileSync } from 'node:fs';
import { addressAt, parseCidr } from '../../src/doctor/ip.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject, ResourceType } from '../../src/kube/types.js';
import type { Plan } from '../../src/plan/types.js';

const crd = (plural: string, kind: string): ResourceType => ({ group: 'crd.projectcalico.org', version: 'v1', plural, kind, namespaced: false });
export const KDD = {
  clusterInfo: crd('clusterinformations', 'ClusterInformation'),
  ipPool: crd('ippools', 'IPPool'),
  gnp: crd('globalnetworkpolicies', 'GlobalNetworkPolicy'),
  np: { ...crd('networkpolicies', 'NetworkPolicy'), namespaced: true },
  block: crd('ipamblocks', 'IPAMBlock'),
};

export const readPlan = (file: string): Plan => JSON.parse(readFileSync(file, 'utf8')) as Plan;

/** The Kubernetes datastore's ClusterInformation lock: true (ready), false (locked), undefined (no copy). */
export async function kddReady(client: KubeClient): Promise<boolean | undefined> {
  return (await client.getOrUndefined<KubeObject>(KDD.clusterInfo, undefined, 'default'))?.spec?.datastoreReady;
}

export async function calicoConfigData(client: KubeClient): Promise<Record<string, string>> {
  return (await client.getOrUndefined<KubeObject>(K.configMap, 'kube-system', 'calico-config'))?.data ?? {};
}

/** Address -> the pod its allocation names, over every IPAM block of the Kubernetes datastore. */
export async function kddIpamHolders(client: KubeClient): Promise<Map<string, string | undefined>> {
  const out = new Map<string, string | undefined>();
  for (const b of await client.listAll<KubeObject>(KDD.block)) {
    const cidr = parseCidr(b.spec.cidr);
    if (!cidr) throw new Error(`IPAMBlock ${b.metadata.name}: no CIDR`);
    (b.spec.allocations as (number | null)[]).forEach((a, o) => a !== null && out.set(addressAt(cidr, o), b.spec.attributes[a]?.secondary?.pod));
  }
  return out;
}

/** The copy a rolled-back migration leaves, deleted as the rollback's message says (kubectl delete crd ...). */
export async function deleteCalicoCrds(client: KubeClient): Promise<string[]> {
  const names = (await client.listAll(K.crd)).filter((c) => c.spec?.group === 'crd.projectcalico.org').map((c) => c.metadata.name);
  for (const n of names) await client.delete(K.crd, undefined, n);
  await client.waitFor(
    'the crd.projectcalico.org CRDs to be deleted',
    async () => ((await client.listAll(K.crd)).some((c) => c.spec?.group === 'crd.projectcalico.org') ? undefined : true),
    { timeoutMs: 120_000, intervalMs: 500 },
  );
  return names;
}
