import { describe, expect, it } from 'vitest';
import { RecordingIoHost, Reporter } from '../io/host.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import type { ResourceResolver } from '../kube/resolver.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import { findDrift, onlyOperatorMarked, refHash, type DriftTarget } from './drift.js';

// Many objects of one custom resource type (global network sets; IPAM kinds are judged otherwise, see below).
const SETS: ResourceType = { group: 'crd.projectcalico.org', version: 'v1', plural: 'globalnetworksets', kind: 'GlobalNetworkSet', namespaced: false };
const set = (i: number, net = '10.0.0.0/26'): KubeObject => ({
  apiVersion: 'crd.projectcalico.org/v1',
  kind: 'GlobalNetworkSet',
  metadata: { name: `s-${i}` },
  spec: { nets: [net] },
});
const target = (o: KubeObject): DriftTarget => ({ action: { id: `${o.kind} ${o.metadata.name}` }, desired: o, type: SETS });

/** A cluster that holds `live` and records the requests made to it; the list fails with 410 after `failAfterPages`. */
function fakeClient(live: KubeObject[], failAfterPages?: number) {
  const calls: string[] = [];
  const server = (o: KubeObject) => ({ ...structuredClone(o), metadata: { ...o.metadata, uid: 'u', resourceVersion: '7', managedFields: [] } });
  const client = {
    async *listPages(_t: ResourceType, opts: { limit?: number }) {
      const limit = opts.limit ?? 500;
      for (let i = 0, page = 0; i < live.length; i += limit, page++) {
        calls.push('LIST');
        if (failAfterPages !== undefined && page >= failAfterPages) throw new KubeApiError(410, 'Expired', 'continue token expired', 'GET', '/x');
        // Items of a list page: server fields added, as the API server sends them.
        yield { items: live.slice(i, i + limit).map(server) };
      }
    },
    async getOrUndefined(_t: ResourceType, _ns: string | undefined, name: string) {
      calls.push(`GET ${name}`);
      const o = live.find((x) => x.metadata.name === name);
      return o ? server(o) : undefined;
    },
  };
  return { client: client as unknown as KubeClient, calls };
}
const resolver = { forObject: async () => SETS } as unknown as ResourceResolver;
const reporter = () => new Reporter(new RecordingIoHost());

describe('findDrift', () => {
  it('reads many objects of one type back with a paged list (no GET each) and reports what changed or went', async () => {
    const written = Array.from({ length: 2_400 }, (_, i) => set(i)); // 1000 per page
    const live = written.filter((o) => o.metadata.name !== 's-7').map((o) => (o.metadata.name === 's-3' ? set(3, '10.9.9.0/26') : o));
    const { client, calls } = fakeClient(live);
    const targets = written.map(target);
    const drifted = await findDrift(client, resolver, targets, 4, reporter());
    expect(calls).toEqual(['LIST', 'LIST', 'LIST']);
    expect(drifted.map((d) => d.id).sort()).toEqual(['GlobalNetworkSet s-3', 'GlobalNetworkSet s-7']);
    expect(targets.find((t) => t.action.id === 'GlobalNetworkSet s-7')!.action.drift).toEqual(['(object is gone)']);
    expect(targets.find((t) => t.action.id === 'GlobalNetworkSet s-3')!.action.drift!.join(' ')).toMatch(/spec\.nets/);
  });

  it('groups targets by their ref without parsing them: each written object is parsed once, where it is compared', async () => {
    const written = Array.from({ length: 120 }, (_, i) => set(i));
    let reads = 0;
    const targets = written.map((o): DriftTarget => {
      const ref = { apiVersion: o.apiVersion, kind: o.kind, name: o.metadata.name };
      return Object.defineProperty({ action: { id: `${o.kind} ${o.metadata.name}` }, ref, type: SETS }, 'desired', { get: () => (reads++, o) });
    });
    const { client } = fakeClient(written);
    expect(await findDrift(client, resolver, targets, 4, reporter())).toEqual([]);
    expect(reads).toBe(120);
  });

  it('namespaced: the same name in two namespaces is two objects, found whatever order the list has', async () => {
    const NETS: ResourceType = { ...SETS, plural: 'networksets', kind: 'NetworkSet', namespaced: true };
    const net = (ns: string, i: number, cidr = '10.0.0.0/26'): KubeObject => ({
      apiVersion: 'crd.projectcalico.org/v1',
      kind: 'NetworkSet',
      metadata: { namespace: ns, name: `n-${i}` },
      spec: { nets: [cidr] },
    });
    const written = ['b', 'a'].flatMap((ns) => Array.from({ length: 60 }, (_, i) => net(ns, i)));
    // Listed in another order than written; b/n-5 gone, a/n-5 changed, b/n-6 changed.
    const live = [...written]
      .reverse()
      .filter((o) => !(o.metadata.namespace === 'b' && o.metadata.name === 'n-5'))
      .map((o) =>
        o.metadata.name === 'n-5' ? net('a', 5, '10.9.9.0/26') : o.metadata.namespace === 'b' && o.metadata.name === 'n-6' ? net('b', 6, '10.8.8.0/26') : o,
      );
    const { client, calls } = fakeClient(live);
    const targets = written.map((o): DriftTarget => ({ action: { id: `NetworkSet ${o.metadata.namespace}/${o.metadata.name}` }, desired: o, type: NETS }));
    const nsResolver = { forObject: async () => NETS } as unknown as ResourceResolver;
    const drifted = await findDrift(client, nsResolver, targets, 4, reporter());
    expect(calls).toEqual(['LIST']);
    expect(drifted.map((d) => d.id).sort()).toEqual(['NetworkSet a/n-5', 'NetworkSet b/n-5', 'NetworkSet b/n-6']);
    expect(targets.find((t) => t.action.id === 'NetworkSet b/n-5')!.action.drift).toEqual(['(object is gone)']);
  });

  it('two names with one hash (s-229599 and s-432382 under FNV-1a) are still two objects: each found by its own name', async () => {
    expect(refHash('', 's-229599')).toBe(refHash('', 's-432382'));
    const written = [...Array.from({ length: 60 }, (_, i) => set(i)), set(229599), set(432382)];
    const live = written.filter((o) => o.metadata.name !== 's-229599').map((o) => (o.metadata.name === 's-432382' ? set(432382, '10.9.9.0/26') : o));
    const { client } = fakeClient(live);
    const targets = written.map(target);
    const drifted = await findDrift(client, resolver, targets, 4, reporter());
    expect(drifted.map((d) => `${d.id}: ${d.paths.join(', ')}`)).toEqual([
      'GlobalNetworkSet s-432382: spec.nets[0]',
      'GlobalNetworkSet s-229599: (object is gone)',
    ]);
  });

  it('a few objects: one GET each', async () => {
    const written = [set(1), set(2)];
    const { client, calls } = fakeClient(written);
    expect(await findDrift(client, resolver, written.map(target), 4, reporter())).toEqual([]);
    expect(calls.sort()).toEqual(['GET s-1', 'GET s-2']);
  });

  it('a list whose continue token expires falls back to GETs for the objects it had not reached', async () => {
    const written = Array.from({ length: 120 }, (_, i) => set(i));
    const live = written.map((o) => (o.metadata.name === 's-110' ? set(110, '10.9.9.0/26') : o));
    const { client, calls } = fakeClient(live, 1);
    const origList = (client as any).listPages;
    (client as any).listPages = (t: ResourceType) => origList(t, { limit: 100 });
    const drifted = await findDrift(client, resolver, written.map(target), 4, reporter());
    expect(calls.filter((c) => c === 'LIST')).toHaveLength(2);
    expect(calls.filter((c) => c.startsWith('GET'))).toHaveLength(20);
    expect(drifted.map((d) => d.id)).toEqual(['GlobalNetworkSet s-110']);
  });

  // Issue 29: calico-node's tunnel allocator and the CNI plugin keep writing IPAM right after the restore.
  const ipam = (kind: string, name: string, spec: unknown): KubeObject => ({ apiVersion: 'crd.projectcalico.org/v1', kind, metadata: { name }, spec });
  const block = (handles: (string | null)[]) => {
    const attributes: { handle_id: string }[] = [];
    const allocations = handles.map((h) => (h === null ? null : attributes.push({ handle_id: h }) - 1));
    return ipam('IPAMBlock', '10-0-0-0-30', { cidr: '10.0.0.0/30', affinity: 'host:n1', allocations, attributes, unallocated: [] });
  };
  const ipamTarget = (o: KubeObject, ordinals?: number[]): DriftTarget => ({
    action: { id: `${o.kind} ${o.metadata.name}`, ...(ordinals ? { ipam: { ordinals } } : {}) },
    desired: o,
  });

  it("judges IPAM by every restored allocation still held by its handle: Calico's own writes after the restore are not drift", async () => {
    const written = [block(['pod-a', 'pod-b', null, null]), ipam('IPAMHandle', 'pod-a', { handleID: 'pod-a', block: { '10.0.0.0/30': 1 } })];
    // The tunnel allocator took ordinal 2 and its handle counts it; pod-a's handle went on to count another block too.
    const live = [
      block(['pod-a', 'pod-b', 'vxlan-tunnel-addr-n1', null]),
      ipam('IPAMHandle', 'pod-a', { handleID: 'pod-a', block: { '10.0.0.0/30': 1, '10.0.0.4/30': 1 } }),
    ];
    const { client } = fakeClient(live);
    expect(
      await findDrift(
        client,
        resolver,
        written.map((o) => ipamTarget(o)),
        4,
        reporter(),
      ),
    ).toEqual([]);
  });

  it('reports a restored allocation another handle took, by address, and only the ordinals the merge put back', async () => {
    const { client } = fakeClient([block(['pod-a', 'pod-x', null, 'other'])]);
    const drifted = await findDrift(client, resolver, [ipamTarget(block(['pod-a', 'pod-b', null, null]))], 4, reporter());
    expect(drifted).toEqual([{ id: 'IPAMBlock 10-0-0-0-30', paths: ['spec.allocations[1] (10.0.0.1, handle pod-b)'] }]);
    // A merged block: only ordinal 0 was put back (1 was a duplicate IP, reported by the merge).
    expect(await findDrift(client, resolver, [ipamTarget(block(['pod-a', 'pod-b', null, null]), [0])], 4, reporter())).toEqual([]);
  });
});

describe("the operator's marking of a pool it adopted is not drift (issue 30)", () => {
  const pool = (meta: Record<string, unknown> | undefined): KubeObject => ({
    apiVersion: 'crd.projectcalico.org/v1',
    kind: 'IPPool',
    metadata: { name: 'p', ...(meta ? { annotations: { 'projectcalico.org/metadata': JSON.stringify(meta) } } : {}) },
    spec: { cidr: '10.0.0.0/16', disabled: true },
  });
  const marked = { 'app.kubernetes.io/managed-by': 'tigera-operator' };

  it('only the managed-by label added to the v3 metadata: not drift; any other change still is', () => {
    expect(onlyOperatorMarked(pool({ creationTimestamp: null }), pool({ labels: marked, creationTimestamp: null }))).toBe(true);
    expect(onlyOperatorMarked(pool(undefined), pool({ labels: marked }))).toBe(true);
    expect(onlyOperatorMarked(pool({ labels: { a: 'b' } }), pool({ labels: { ...marked, a: 'b' } }))).toBe(true);
    expect(onlyOperatorMarked(pool({ labels: { a: 'b' } }), pool({ labels: { ...marked, a: 'c' } }))).toBe(false);
    expect(onlyOperatorMarked(pool({ labels: { a: 'b' } }), pool({ labels: { a: 'b' } }))).toBe(false);
    expect(onlyOperatorMarked(pool(undefined), pool({ labels: { 'app.kubernetes.io/managed-by': 'someone-else' } }))).toBe(false);
    expect(onlyOperatorMarked({ ...pool(undefined), kind: 'GlobalNetworkSet' }, { ...pool({ labels: marked }), kind: 'GlobalNetworkSet' })).toBe(false);
  });
});

describe("operator v1.34's rewrite of a disabled pool from the entry restore stopped is not drift (issue 30)", () => {
  const POOLS: ResourceType = { group: 'crd.projectcalico.org', version: 'v1', plural: 'ippools', kind: 'IPPool', namespaced: false };
  const marked = { 'projectcalico.org/metadata': JSON.stringify({ labels: { 'app.kubernetes.io/managed-by': 'tigera-operator' } }) };
  const spec = { cidr: '192.168.0.0/16', blockSize: 26, ipipMode: 'Always', natOutgoing: true, nodeSelector: 'all()', allowedUses: ['Workload', 'Tunnel'] };
  const written: KubeObject = {
    apiVersion: 'crd.projectcalico.org/v1',
    kind: 'IPPool',
    metadata: { name: 'p', annotations: marked },
    spec: { ...spec, disabled: true },
  };
  const drift = async (live: KubeObject) => {
    const { client } = fakeClient([live]);
    const t: DriftTarget = { action: { id: 'IPPool p' }, desired: written, type: POOLS };
    return (await findDrift(client, { forObject: async () => POOLS } as unknown as ResourceResolver, [t], 1, reporter()))[0]?.paths ?? [];
  };
  const rewritten = (extra: Record<string, unknown>, annotations: Record<string, string> = marked): KubeObject => ({
    ...written,
    metadata: { name: 'p', annotations },
    spec: { ...spec, nodeSelector: '!all()', ...extra },
  });

  it('marked by the operator, nodeSelector "!all()" and no disabled, the rest as written: not drift', async () => {
    expect(await drift(rewritten({}))).toEqual([]);
    expect(await drift(rewritten({ disabled: false }))).toEqual([]);
  });

  it('any other change still is: an enabled selector, another field, or a pool the operator did not mark', async () => {
    expect(await drift({ ...written, spec: { ...spec } })).toEqual(['spec.disabled']);
    expect(await drift(rewritten({ natOutgoing: false }))).toEqual(['spec.natOutgoing', 'spec.nodeSelector', 'spec.disabled']);
    expect(await drift(rewritten({}, {}))).toEqual(expect.arrayContaining(['spec.nodeSelector', 'spec.disabled']));
  });
});
