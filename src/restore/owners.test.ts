import { describe, expect, it } from 'vitest';
import { RecordingIoHost, Reporter } from '../io/host.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import type { ResourceResolver } from '../kube/resolver.js';
import type { KubeObject, OwnerReference, ResourceType } from '../kube/types.js';
import { OwnerLookup, relinkOwners, releaseFromGoneOwners } from './owners.js';
import type { Planned } from './types.js';

const INSTALLATION: ResourceType = { group: 'operator.tigera.io', version: 'v1', plural: 'installations', kind: 'Installation', namespaced: false };
const NAMESPACE: ResourceType = { group: '', version: 'v1', plural: 'namespaces', kind: 'Namespace', namespaced: false };
const ref = (uid: string, kind = 'Installation', name = 'default'): OwnerReference => ({
  apiVersion: 'operator.tigera.io/v1',
  kind,
  name,
  uid,
  controller: true,
  blockOwnerDeletion: true,
});
const ns = (refs: OwnerReference[], rv = '7'): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Namespace',
  metadata: { name: 'calico-system', uid: 'ns-uid', resourceVersion: rv, ownerReferences: refs },
});

/**
 * A cluster with some live objects by `Kind/name`, the Installation kind served or not; merge patches are applied as
 * the API server would (a stale resourceVersion is a 409) and recorded.
 */
function cluster(objects: Record<string, KubeObject>, opts: { served?: boolean } = {}) {
  const patches: { key: string; body: any }[] = [];
  const key = (t: ResourceType, name: string) => `${t.kind}/${name}`;
  const client = {
    getOrUndefined: async (t: ResourceType, _ns: string | undefined, name: string) => structuredClone(objects[key(t, name)]),
    get: async (t: ResourceType, _ns: string | undefined, name: string) => {
      const o = objects[key(t, name)];
      if (!o) throw new KubeApiError(404, 'NotFound', 'not found', 'GET', '/x');
      return structuredClone(o);
    },
    mergePatch: async (t: ResourceType, _ns: string | undefined, name: string, body: any) => {
      const o = objects[key(t, name)];
      if (!o) throw new KubeApiError(404, 'NotFound', 'not found', 'GET', '/x');
      if (body.metadata.resourceVersion && body.metadata.resourceVersion !== o.metadata.resourceVersion)
        throw new KubeApiError(409, 'Conflict', 'the object has been modified', 'PATCH', '/x');
      patches.push({ key: key(t, name), body });
      const refs = body.metadata.ownerReferences;
      if (refs === null) delete o.metadata.ownerReferences;
      else if (refs) o.metadata.ownerReferences = refs;
      o.metadata.resourceVersion = String(Number(o.metadata.resourceVersion) + 1);
      return structuredClone(o);
    },
  } as unknown as KubeClient;
  const resolver = {
    resolve: async (apiVersion: string, kind: string) =>
      kind === 'Installation' && opts.served !== false ? INSTALLATION : kind === 'Namespace' && apiVersion === 'v1' ? NAMESPACE : undefined,
    forObject: async (o: KubeObject) => (o.kind === 'Namespace' ? NAMESPACE : undefined),
    forget: () => undefined,
  } as unknown as ResourceResolver;
  return { client, resolver, patches, objects };
}

const planned = (bundleObject: KubeObject, live: KubeObject | undefined, goneOwners?: string[]): Planned => ({
  action: {
    ref: { apiVersion: 'v1', kind: 'Namespace', name: 'calico-system' },
    id: 'Namespace calico-system',
    phase: 'config',
    action: 'unchanged',
    goneOwners,
  },
  desiredText: JSON.stringify(bundleObject),
  live,
  type: NAMESPACE,
  rank: 0,
});

describe('objects whose owners are gone', () => {
  it('are found when every owner is missing or has another UID, also when the kind is not served (the CRD deleted)', async () => {
    const live = ns([ref('old')]);
    // The Installation CRD is gone: the collector cannot judge the reference yet, and will once the CRD is back.
    expect(await new OwnerLookup(cluster({}, { served: false }).client, cluster({}, { served: false }).resolver).goneOwners(live)).toHaveLength(1);
    // Served, the Installation re-created (another UID).
    const recreated = cluster({
      'Installation/default': { apiVersion: 'operator.tigera.io/v1', kind: 'Installation', metadata: { name: 'default', uid: 'new' } },
    });
    expect(await new OwnerLookup(recreated.client, recreated.resolver).goneOwners(live)).toEqual([ref('old')]);
    // The owner is there: nothing to do.
    expect(await new OwnerLookup(recreated.client, recreated.resolver).goneOwners(ns([ref('new')]))).toEqual([]);
    // One owner left: the collector keeps the object (it only drops the dangling reference).
    expect(await new OwnerLookup(recreated.client, recreated.resolver).goneOwners(ns([ref('old', 'Installation', 'other'), ref('new')]))).toEqual([]);
    expect(await new OwnerLookup(recreated.client, recreated.resolver).goneOwners(ns([]))).toEqual([]);
  });

  it('lose the references before anything is written, conditionally on the resourceVersion, and are linked to the restored owner after', async () => {
    const c = cluster({ 'Namespace/calico-system': ns([ref('old')], '7') }, { served: false });
    const reporter = new Reporter(new RecordingIoHost());
    // The plan saw resourceVersion 6: someone changed it since (a 409), so it is read again and released then.
    const p = planned(ns([ref('old')]), ns([ref('old')], '6'), ['Installation default']);
    const released = await releaseFromGoneOwners(c.client, c.resolver, new OwnerLookup(c.client, c.resolver), [p], reporter);
    expect(released).toEqual([p]);
    expect(c.patches).toEqual([{ key: 'Namespace/calico-system', body: { metadata: { ownerReferences: null, resourceVersion: '7' } } }]);
    expect(c.objects['Namespace/calico-system']!.metadata.ownerReferences).toBeUndefined();

    // The restore wrote the Installation (its CRD served again): the namespace is linked to it, with the UID the
    // write returned (remembered, not asked again: asked before the write, it was cached as missing).
    const served = cluster(c.objects).resolver;
    const owners = new OwnerLookup(c.client, served);
    expect(await owners.uidOf(ref('old'), undefined)).toBeUndefined();
    owners.remember(INSTALLATION, { apiVersion: 'operator.tigera.io/v1', kind: 'Installation', metadata: { name: 'default', uid: 'restored' } });
    const linked = await relinkOwners(c.client, served, owners, released, reporter);
    expect(linked).toEqual({ linked: ['Namespace calico-system'], problems: [] });
    expect(c.objects['Namespace/calico-system']!.metadata.ownerReferences).toEqual([ref('restored')]);
    expect(p.action.notes?.join(' ')).toMatch(/linked to Installation default \(uid restored\)/);
  });

  it('an owner written before anything asked for it is not remembered but read when asked (no entry per object written)', async () => {
    const c = cluster({ 'Installation/default': { apiVersion: 'operator.tigera.io/v1', kind: 'Installation', metadata: { name: 'default', uid: 'live' } } });
    const owners = new OwnerLookup(c.client, c.resolver);
    owners.remember(INSTALLATION, { apiVersion: 'operator.tigera.io/v1', kind: 'Installation', metadata: { name: 'default', uid: 'from-write' } });
    expect(await owners.uidOf(ref('x'), undefined)).toBe('live');
  });

  it('one the garbage collector deleted first is created from the bundle instead', async () => {
    const c = cluster({}, { served: false });
    const p = planned(ns([ref('old')]), ns([ref('old')]), ['Installation default']);
    expect(await releaseFromGoneOwners(c.client, c.resolver, new OwnerLookup(c.client, c.resolver), [p], new Reporter(new RecordingIoHost()))).toEqual([]);
    expect(p.action.action).toBe('create');
    expect(p.live).toBeUndefined();
  });

  it('a reference set meanwhile to a live owner stays, and keeps the object from being released', async () => {
    const c = cluster({
      'Installation/default': { apiVersion: 'operator.tigera.io/v1', kind: 'Installation', metadata: { name: 'default', uid: 'new' } },
      'Namespace/calico-system': ns([ref('new')], '8'),
    });
    const p = planned(ns([ref('old')]), ns([ref('old')], '7'), ['Installation default']);
    expect(await releaseFromGoneOwners(c.client, c.resolver, new OwnerLookup(c.client, c.resolver), [p], new Reporter(new RecordingIoHost()))).toEqual([]);
    expect(c.patches).toEqual([]);
    expect(c.objects['Namespace/calico-system']!.metadata.ownerReferences).toEqual([ref('new')]);
  });
});

describe('OwnerLookup.dependentsOf (--existing replace never deletes an owner, issue 30)', () => {
  const GNS: ResourceType = { group: 'crd.projectcalico.org', version: 'v1', plural: 'globalnetworksets', kind: 'GlobalNetworkSet', namespaced: false };
  const owned = (kind: string, name: string, namespace: string | undefined, uid: string): KubeObject => ({
    apiVersion: 'v1',
    kind,
    metadata: { name, ...(namespace ? { namespace } : {}), ownerReferences: [ref(uid, 'GlobalNetworkSet', 'owner')] },
  });
  function listing() {
    const lists: string[] = [];
    const client = {
      listAll: async (t: ResourceType, opts?: { namespace?: string }) => {
        lists.push(`${t.kind}${opts?.namespace ? ` ${opts.namespace}` : ''}`);
        if (t.kind === 'ConfigMap' && opts?.namespace === 'calico-system') return [owned('ConfigMap', 'cm', 'calico-system', 'owner-uid')];
        if (t.kind === 'GlobalNetworkSet')
          return [owned('GlobalNetworkSet', 'child', undefined, 'owner-uid'), owned('GlobalNetworkSet', 'x', undefined, 'other')];
        return [];
      },
    } as unknown as KubeClient;
    return { lists, lookup: new OwnerLookup(client, {} as ResourceResolver) };
  }
  const live = (uid?: string): KubeObject => ({ apiVersion: 'crd.projectcalico.org/v1', kind: 'GlobalNetworkSet', metadata: { name: 'owner', uid }, spec: {} });

  it("finds what names it among the operator's rendered kinds in the Calico namespaces and its own kind, each list read once", async () => {
    const { lists, lookup } = listing();
    expect(await lookup.dependentsOf(live('owner-uid'), GNS)).toEqual(['ConfigMap calico-system/cm', 'GlobalNetworkSet child']);
    const after = lists.length;
    expect(lists).toContain('ConfigMap calico-system');
    expect(lists).toContain('ClusterRoleBinding');
    expect(await lookup.dependentsOf(live('no-dependents'), GNS)).toEqual([]);
    expect(lists.length).toBe(after);
  });

  it('an object without a UID has none', async () => {
    const { lists, lookup } = listing();
    expect(await lookup.dependentsOf(live(), GNS)).toEqual([]);
    expect(lists).toEqual([]);
  });
});
