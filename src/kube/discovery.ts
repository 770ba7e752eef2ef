import type { KubeClient } from './client.js';
import { K } from './builtin.js';
import type { KubeObject, ResourceType } from './types.js';

interface ApiResourceList {
  groupVersion: string;
  resources: { name: string; kind: string; namespaced: boolean; verbs: string[] }[];
}

/**
 * Resource types served for one API group, at the group's preferred version.
 * Sub-resources (`ippools/status`) are left out. Returns [] when the group is not served.
 */
export async function discoverGroup(client: KubeClient, group: string): Promise<ResourceType[]> {
  const groups: { groups: { name: string; preferredVersion: { version: string } }[] } = await client.request('GET', '/apis');
  const g = groups.groups.find((x) => x.name === group);
  if (!g) return [];
  const list: ApiResourceList = await client.request('GET', `/apis/${group}/${g.preferredVersion.version}`);
  return list.resources
    .filter((r) => !r.name.includes('/'))
    .map((r) => ({ group, version: g.preferredVersion.version, plural: r.name, kind: r.kind, namespaced: r.namespaced, verbs: r.verbs }));
}

/** The CRDs installed in the cluster, optionally only those of some groups. */
export async function listCrds(client: KubeClient, groups?: readonly string[]): Promise<KubeObject[]> {
  const all = await client.listAll(K.crd);
  return groups ? all.filter((c) => groups.includes(c.spec?.group)) : all;
}

/** The resource type a CRD defines, at its storage version (what etcd holds). */
export function crdResourceType(crd: KubeObject): ResourceType {
  const versions: any[] = crd.spec.versions ?? [];
  const v = versions.find((x) => x.storage) ?? versions.find((x) => x.served) ?? versions[0];
  return {
    group: crd.spec.group,
    version: v?.name,
    plural: crd.spec.names.plural,
    kind: crd.spec.names.kind,
    namespaced: crd.spec.scope === 'Namespaced',
  };
}

export function crdEstablished(crd: KubeObject | undefined): boolean {
  return !!crd?.status?.conditions?.some((c: any) => c.type === 'Established' && c.status === 'True');
}

/** Is this aggregated API group (e.g. `projectcalico.org` of the Calico API server) served and available? */
export async function groupAvailable(client: KubeClient, group: string): Promise<boolean> {
  try {
    const types = await discoverGroup(client, group);
    return types.length > 0;
  } catch {
    return false;
  }
}
