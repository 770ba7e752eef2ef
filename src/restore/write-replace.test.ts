import { describe, expect, it } from 'vitest';
import { RecordingIoHost, Reporter } from '../io/host.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import type { ResourceResolver } from '../kube/resolver.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import { OwnerLookup } from './owners.js';
import { updatedInPlaceNote } from './replace.js';
import type { Planned } from './types.js';
import { writeOne } from './write.js';

const GNS: ResourceType = { group: 'crd.projectcalico.org', version: 'v1', plural: 'globalnetworksets', kind: 'GlobalNetworkSet', namespaced: false };
const set = (meta: Partial<KubeObject['metadata']>, nets = ['198.51.100.0/24']): KubeObject => ({
  apiVersion: 'crd.projectcalico.org/v1',
  kind: 'GlobalNetworkSet',
  metadata: { name: 'blocked', ...meta },
  spec: { nets },
});

/** One live GlobalNetworkSet (and whatever `others` lists for the dependents lookup); every request recorded. */
function cluster(live: KubeObject, others: KubeObject[] = [], replaceFails?: KubeApiError) {
  const calls: { verb: string; body?: KubeObject }[] = [];
  const client = {
    get: async () => structuredClone(live),
    getOrUndefined: async () => structuredClone(live),
    listAll: async (t: ResourceType) => (t.kind === 'GlobalNetworkSet' ? [live, ...others] : []),
    replace: async (_t: ResourceType, body: KubeObject) => {
      calls.push({ verb: 'replace', body });
      if (replaceFails) throw replaceFails;
      return { ...body, metadata: { ...body.metadata, uid: live.metadata.uid } };
    },
    delete: async () => void calls.push({ verb: 'delete' }),
    create: async (_t: ResourceType, body: KubeObject) => (calls.push({ verb: 'create', body }), body),
    waitFor: async () => true,
  } as unknown as KubeClient;
  const resolver = { forObject: async () => GNS, resolve: async () => GNS } as unknown as ResourceResolver;
  return { calls, client, resolver, owners: new OwnerLookup(client, resolver) };
}
const planned = (action: 'replace' | 'update', desired: KubeObject, notes?: string[]): Planned => ({
  action: {
    ref: { apiVersion: desired.apiVersion, kind: desired.kind, name: desired.metadata.name },
    id: 'GlobalNetworkSet blocked',
    phase: 'x',
    action,
    notes,
  },
  desiredText: JSON.stringify(desired),
  type: GNS,
  rank: 0,
});
const reporter = () => new Reporter(new RecordingIoHost());
const ownerRef = { apiVersion: 'example.com/v1', kind: 'Keeper', name: 'k', uid: 'keeper-uid' };

describe('--existing replace at write time (issue 30)', () => {
  it('deletes and re-creates an object nothing holds', async () => {
    const c = cluster(set({ uid: 'u1', resourceVersion: '5' }));
    await writeOne(c.client, c.resolver, planned('replace', set({}, ['10.0.0.0/8'])), c.owners, reporter());
    expect(c.calls.map((x) => x.verb)).toEqual(['delete', 'create']);
  });

  it('updates in place an object another names as its owner (found since planning): the live version, owners and finalizers kept', async () => {
    const child = {
      ...set({ name: 'child', uid: 'u2', ownerReferences: [{ apiVersion: 'crd.projectcalico.org/v1', kind: 'GlobalNetworkSet', name: 'blocked', uid: 'u1' }] }),
    };
    const c = cluster(set({ uid: 'u1', resourceVersion: '5', ownerReferences: [ownerRef], finalizers: [] }), [child]);
    const p = planned('replace', set({}, ['10.0.0.0/8']));
    await writeOne(c.client, c.resolver, p, c.owners, reporter());
    expect(c.calls.map((x) => x.verb)).toEqual(['replace']);
    expect(c.calls[0]!.body!.metadata).toMatchObject({ resourceVersion: '5', ownerReferences: [ownerRef] });
    expect(c.calls[0]!.body!.spec.nets).toEqual(['10.0.0.0/8']);
    expect(p.action.notes).toEqual([expect.stringMatching(/^updated in place, .*1 object\(s\) name it as their owner \(GlobalNetworkSet child\)/)]);
  });

  it('refuses in one line, deleting nothing, when the API server does not accept the in-place update (an immutable field)', async () => {
    const invalid = new KubeApiError(422, 'Invalid', 'spec.cidr: field is immutable', 'PUT', '/x');
    const c = cluster(set({ uid: 'u1', resourceVersion: '5', finalizers: ['example.com/keep'] }), [], invalid);
    const p = planned('update', set({}, ['10.0.0.0/8']), [updatedInPlaceNote('it has finalizers (example.com/keep)')]);
    await expect(writeOne(c.client, c.resolver, p, c.owners, reporter())).rejects.toThrow(
      /^refused: the API server does not accept the bundle's version as an update \(.*immutable.*\), and --existing replace does not delete/,
    );
    expect(c.calls.map((x) => x.verb)).toEqual(['replace']);
  });

  it('a plain update (--existing update) sends the bundle owners as they are', async () => {
    const c = cluster(set({ uid: 'u1', resourceVersion: '5', ownerReferences: [ownerRef] }));
    await writeOne(c.client, c.resolver, planned('update', set({})), c.owners, reporter());
    expect(c.calls[0]!.body!.metadata.ownerReferences).toBeUndefined();
  });
});
