import { describe, expect, it, vi } from 'vitest';
import { RecordingIoHost, Reporter } from '../io/host.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import type { ResourceResolver } from '../kube/resolver.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import { blockRecreated, ipamDrift, mergeBlock } from './ipam-merge.js';
import type { OwnerLookup } from './owners.js';
import type { Planned } from './types.js';
import { writeOne } from './write.js';

const type = (kind: string, plural: string): ResourceType => ({ group: 'crd.projectcalico.org', version: 'v1', plural, kind, namespaced: false });
const BLOCKS = type('IPAMBlock', 'ipamblocks');
const HANDLES = type('IPAMHandle', 'ipamhandles');
const AFFINITIES = type('BlockAffinity', 'blockaffinities');
const calico = (kind: string, name: string, spec: any): KubeObject => ({ apiVersion: 'crd.projectcalico.org/v1', kind, metadata: { name }, spec });
const block = (handles: (string | null)[], extra: object = {}) => {
  const attributes: { handle_id: string }[] = [];
  const allocations = handles.map((h) => (h === null ? null : attributes.push({ handle_id: h }) - 1));
  const unallocated = handles.flatMap((h, i) => (h === null ? [i] : []));
  return calico('IPAMBlock', '10-0-0-0-30', { cidr: '10.0.0.0/30', affinity: 'host:n1', allocations, attributes, unallocated, ...extra });
};

/**
 * The API server's answers for the objects in `store` (by kind and name): create meets 409 when the object is there,
 * a PUT needs the current resourceVersion. `writeFirst` is another writer's change, made once before our first PUT.
 */
function server(store: KubeObject[], writeFirst?: (o: KubeObject) => void) {
  const puts: KubeObject[] = [];
  const at = (kind: string, name: string) => store.findIndex((o) => o.kind === kind && o.metadata.name === name);
  let rv = 1;
  for (const o of store) o.metadata.resourceVersion = String(rv++);
  const client = {
    async create(t: ResourceType, body: KubeObject) {
      if (at(t.kind, body.metadata.name) >= 0) throw new KubeApiError(409, 'AlreadyExists', 'exists', 'POST', '/x');
      store.push({ ...body, metadata: { ...body.metadata, resourceVersion: String(rv++) } });
      return body;
    },
    async get(t: ResourceType, _ns: string | undefined, name: string) {
      return structuredClone(store[at(t.kind, name)]!);
    },
    async getOrUndefined(t: ResourceType, ns: string | undefined, name: string) {
      const o = store.find((x) => x.kind === t.kind && x.metadata.name === name && x.metadata.namespace === ns);
      return o && structuredClone(o);
    },
    async listAll(t: ResourceType) {
      return store.filter((o) => o.kind === t.kind).map((o) => structuredClone(o));
    },
    async replace(t: ResourceType, body: KubeObject) {
      const i = at(t.kind, body.metadata.name);
      if (writeFirst) {
        writeFirst(store[i]!);
        store[i]!.metadata.resourceVersion = String(rv++);
        writeFirst = undefined;
      }
      if (store[i]!.metadata.resourceVersion !== body.metadata.resourceVersion) throw new KubeApiError(409, 'Conflict', 'changed', 'PUT', '/x');
      puts.push(structuredClone(body));
      store[i] = { ...body, metadata: { ...body.metadata, resourceVersion: String(rv++) } };
      return body;
    },
  };
  return { client: client as unknown as KubeClient, puts, store };
}

const write = (client: KubeClient, t: ResourceType, action: 'create' | 'update', desired: KubeObject, ipam?: Planned['action']['ipam']) => {
  const p: Planned = {
    action: {
      ref: { apiVersion: desired.apiVersion, kind: desired.kind, name: desired.metadata.name },
      id: `${desired.kind} ${desired.metadata.name}`,
      phase: 'ipam',
      action,
      ...(ipam ? { ipam } : {}),
    },
    desiredText: JSON.stringify(desired),
    type: t,
    rank: 0,
  };
  const resolver = { forObject: async () => t } as unknown as ResourceResolver;
  const owners = { uidOf: async () => undefined, remember: () => {} } as unknown as OwnerLookup;
  return { p, done: writeOne(client, resolver, p, owners, new Reporter(new RecordingIoHost())) };
};

/** A block write to its end through its settle waits (ipam-write.ts reads a block with a duplicate again later). */
async function settled<T>(w: { p: Planned; done: Promise<T> }): Promise<Planned> {
  try {
    await vi.runAllTimersAsync();
  } finally {
    vi.useRealTimers();
  }
  await w.done;
  return w.p;
}

/** Each ordinal's handle in a block's spec (null: free). */
const handlesOf = (spec: any) => spec.allocations.map((a: number | null) => (a === null ? null : spec.attributes[a].handle_id));

describe('restore writes IPAM without overwriting what Calico wrote', () => {
  it('a block create that meets 409 merges the bundle allocations into the live block, never PUTs the bundle copy', async () => {
    // calico-node's tunnel allocator claimed the block between planning and writing.
    const { client, puts, store } = server([block([null, null, 'vxlan-tunnel-addr-n1', null])]);
    const { p, done } = write(client, BLOCKS, 'create', block(['pod-a', 'pod-b', null, null]));
    await done;
    expect(puts).toHaveLength(1);
    expect(handlesOf(store[0]!.spec)).toEqual(['pod-a', 'pod-b', 'vxlan-tunnel-addr-n1', null]);
    expect(store[0]!.spec.unallocated).toEqual([3]);
    expect(p.action.ipam).toEqual({ ordinals: [0, 1] });
  });

  it('a merge that meets a write conflict reads the block again and merges into that; a taken address is a duplicate', async () => {
    const { client, store } = server([block(['vxlan-tunnel-addr-n1', null, null, null])], (live) => {
      live.spec.attributes.push({ handle_id: 'pod-new' });
      live.spec.allocations[2] = live.spec.attributes.length - 1;
    });
    vi.useFakeTimers();
    // Still held by the same handle a settle later: a duplicate, not an ADD in flight.
    const p = await settled(write(client, BLOCKS, 'update', block(['vxlan-tunnel-addr-n1', 'pod-a', 'pod-b', null]), { ordinals: [1, 2] }));
    expect(handlesOf(store[0]!.spec)).toEqual(['vxlan-tunnel-addr-n1', 'pod-a', 'pod-new', null]);
    expect(p.action.ipam?.duplicates).toEqual([expect.stringMatching(/^duplicate IP 10\.0\.0\.2: .*handle pod-b.*handle pod-new/)]);
    expect(p.action.ipam?.ordinals).toEqual([1]);
  });

  // node-side-night.test.ts: planned while free, the address went to the new calico-system pod that replaced the
  // bundle's (deleted by the operator's teardown) before the restore wrote the block.
  it('an address taken since the plan by the successor of a bundle pod that is gone is no duplicate; one whose bundle pod runs is', async () => {
    const bundle = block(['vxlan-tunnel-addr-n1', 'k8s-pod-network.a', 'k8s-pod-network.b', null]);
    bundle.spec.attributes[1].secondary = { namespace: 'calico-system', pod: 'csi-node-driver-7vnbn' };
    bundle.spec.attributes[2].secondary = { namespace: 'web', pod: 'b-1' };
    const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { namespace: 'web', name: 'b-1', annotations: { 'cni.projectcalico.org/containerID': 'b' } } };
    const { client, store } = server([block(['vxlan-tunnel-addr-n1', null, null, null]), pod], (live) => {
      live.spec.attributes.push({ handle_id: 'k8s-pod-network.new1' }, { handle_id: 'k8s-pod-network.new2' });
      live.spec.allocations[1] = live.spec.attributes.length - 2;
      live.spec.allocations[2] = live.spec.attributes.length - 1;
    });
    vi.useFakeTimers();
    const p = await settled(write(client, BLOCKS, 'update', bundle, { ordinals: [1, 2] }));
    expect(store[0]!.spec.allocations).toEqual([0, 1, 2, null]);
    expect(p.action.ipam?.duplicates).toEqual([expect.stringMatching(/^duplicate IP 10\.0\.0\.2: .*\(pod web\/b-1\).*restart pod web\/b-1/)]);
  });

  // node-side-night.test.ts (rehearsals): a failing ADD retried every few seconds holds a planned address for under a
  // second, then takes the next free one; the write met it and reported a duplicate, leaving the bundle pod's address free.
  it('a duplicate first met at the write is read again a settle later: an address an ADD in flight held goes back to the bundle pod', async () => {
    const bundle = block(['vxlan-tunnel-addr-n1', 'k8s-pod-network.a', 'k8s-pod-network.b', null]);
    const { client, store, puts } = server([block(['vxlan-tunnel-addr-n1', null, 'k8s-pod-network.retry', null])]);
    let gets = 0;
    const get = client.get.bind(client);
    client.get = async (t, ns, name) => {
      // The ADD failed and released .2 (to the end of unallocated), and its next try took .3.
      if (++gets === 2) store[0]!.spec.allocations = [0, store[0]!.spec.allocations[1], null, 1];
      return get(t, ns, name);
    };
    vi.useFakeTimers();
    const p = await settled(write(client, BLOCKS, 'update', bundle, { ordinals: [1, 2] }));
    expect(handlesOf(store[0]!.spec)).toEqual(['vxlan-tunnel-addr-n1', 'k8s-pod-network.a', 'k8s-pod-network.b', 'k8s-pod-network.retry']);
    // What is free is written before the wait (.1), the rest after it (.2).
    expect(puts).toHaveLength(2);
    expect(p.action.ipam).toEqual({ ordinals: [1, 2] });
  });

  // node-side-night.test.ts (a rehearsal): planned into a re-created block while its address was free, the handle's
  // allocation met the successor of its (gone) pod at the write; the handle was still created, with no address.
  it('a handle planned into a block the cluster has is created only while that block still allocates to it', async () => {
    const handle = calico('IPAMHandle', 'k8s-pod-network.old', { handleID: 'k8s-pod-network.old', block: { '10.0.0.0/30': 1 } });
    const taken = server([block(['vxlan-tunnel-addr-n1', 'k8s-pod-network.new', null, null])]);
    const skipped = write(taken.client, HANDLES, 'create', handle, { recheck: ['10-0-0-0-30'] });
    await skipped.done;
    expect(taken.store.map((o) => o.kind)).toEqual(['IPAMBlock']);
    expect(skipped.p.action.action).toBe('skip');
    expect(skipped.p.action.reason).toMatch(/^not created: block 10-0-0-0-30 no longer allocates an address to it/);

    const held = server([block(['vxlan-tunnel-addr-n1', 'k8s-pod-network.old', null, null])]);
    const created = write(held.client, HANDLES, 'create', handle, { recheck: ['10-0-0-0-30'] });
    await created.done;
    expect(held.store.map((o) => o.metadata.name)).toEqual(['10-0-0-0-30', 'k8s-pod-network.old']);
    expect(created.p.action.action).toBe('create');
  });

  it('a handle update raises the live counts to what the blocks allocate to it', async () => {
    const live = calico('IPAMHandle', 'vxlan-tunnel-addr-n1', { handleID: 'vxlan-tunnel-addr-n1', block: { '192.168.0.0/30': 1 } });
    const { client, store } = server([block(['vxlan-tunnel-addr-n1', 'pod-a', null, null]), live]);
    await write(client, HANDLES, 'update', calico('IPAMHandle', 'vxlan-tunnel-addr-n1', { handleID: 'vxlan-tunnel-addr-n1', block: { '10.0.0.0/30': 1 } }))
      .done;
    expect(store[1]!.spec.block).toEqual({ '192.168.0.0/30': 1, '10.0.0.0/30': 1 });
  });

  it('a handle create that meets 409 raises the live count to what the blocks allocate to it; an affinity that exists is left alone', async () => {
    const live = calico('IPAMHandle', 'pod-a', { handleID: 'pod-a', block: {} });
    const aff = calico('BlockAffinity', 'n1-10-0-0-0-30', { node: 'n1', cidr: '10.0.0.0/30', state: 'pending' });
    const { client, puts, store } = server([block(['pod-a', 'pod-a', null, null]), live, aff]);
    await write(client, HANDLES, 'create', calico('IPAMHandle', 'pod-a', { handleID: 'pod-a', block: { '10.0.0.0/30': 1 } })).done;
    expect(store[1]!.spec.block).toEqual({ '10.0.0.0/30': 2 });
    await write(client, AFFINITIES, 'create', calico('BlockAffinity', 'n1-10-0-0-0-30', { node: 'n1', cidr: '10.0.0.0/30', state: 'confirmed' })).done;
    expect(store[2]!.spec.state).toBe('pending');
    expect(puts.map((o) => o.kind)).toEqual(['IPAMHandle']);
  });
});

describe('the per-address merge', () => {
  it('shares one attribute entry per owner, takes the ordinals out of unallocated and keeps their sequence numbers', () => {
    const bundle = block(['pod-a', 'pod-a', null, null], { sequenceNumberForAllocation: { '0': 7, '1': 7 } });
    bundle.spec.attributes = [{ handle_id: 'pod-a', secondary: { namespace: 'web', pod: 'a' } }];
    bundle.spec.allocations = [0, 0, null, null];
    const m = mergeBlock(block([null, null, 't', null]), bundle);
    expect(m.restored).toEqual([0, 1]);
    expect(m.block.spec.allocations).toEqual([1, 1, 0, null]);
    expect(m.block.spec.attributes).toHaveLength(2);
    expect(m.block.spec.unallocated).toEqual([3]);
    expect(m.block.spec.sequenceNumberForAllocation).toEqual({ '0': 7, '1': 7 });
  });

  it("judges a restored block by its pod allocations: a tunnel address the node's allocator released since is its normal work", () => {
    const restored = block(['vxlan-tunnel-addr-n1', 'pod-a', null, null]);
    expect(ipamDrift(restored, block([null, 'pod-a', 'vxlan-tunnel-addr-n1', null]))).toEqual([]);
    expect(ipamDrift(restored, block(['vxlan-tunnel-addr-n1', null, null, null]))).toEqual(['spec.allocations[1] (10.0.0.1, handle pod-a)']);
    const tunnel = calico('IPAMHandle', 'vxlan-tunnel-addr-n1', { handleID: 'vxlan-tunnel-addr-n1', block: {} });
    expect(ipamDrift(tunnel, undefined)).toEqual([]);
    expect(ipamDrift(calico('IPAMHandle', 'pod-a', { handleID: 'pod-a', block: {} }), undefined)).toEqual(['(object is gone)']);
  });

  it('tells a re-created block from one that changed: a sequenceNumber jump, else created after the backup', () => {
    const seq = (n: number, created?: string) => {
      const b = block([null], { sequenceNumber: n });
      if (created) b.metadata.creationTimestamp = created;
      return b;
    };
    expect(blockRecreated(seq(1_000_000_000_000_001_024), seq(1_000_000_000_000_000_000))).toBe(false);
    expect(blockRecreated(seq(1_000_000_090_000_000_000), seq(1_000_000_000_000_000_000))).toBe(true);
    const old = (created: string) => ({ ...block([null]), metadata: { name: 'b', creationTimestamp: created } });
    expect(blockRecreated(old('2026-12-05T01:00:00Z'), block([null]), '2026-12-04T00:00:00Z')).toBe(true);
    expect(blockRecreated(old('2026-12-03T01:00:00Z'), block([null]), '2026-12-04T00:00:00Z')).toBe(false);
  });
});
