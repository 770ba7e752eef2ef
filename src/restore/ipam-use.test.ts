import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../kube/types.js';
import { mergeIpamPlan, type IpamPlanned } from './ipam.js';
import { AddressUse, readAddressUse } from './ipam-use.js';

const calico = (kind: string, name: string, spec: unknown): KubeObject => ({ apiVersion: 'crd.projectcalico.org/v1', kind, metadata: { name }, spec });
/** A /29 block 10.0.0.0-7 on node n1: each ordinal allocated to the handle at that position (null = free). */
const block = (handles: (string | null)[], seq?: number) => {
  const attributes: { handle_id: string; secondary: Record<string, string> }[] = [];
  const allocations = handles.map((h) => {
    if (h === null) return null;
    const secondary: Record<string, string> = h.startsWith('k8s-pod-network.')
      ? { namespace: 'web', pod: h.slice(16) }
      : { node: 'n1', type: 'vxlanTunnelAddress' };
    return attributes.push({ handle_id: h, secondary }) - 1;
  });
  const unallocated = handles.map((h, o) => (h === null ? o : -1)).filter((o) => o >= 0);
  return calico('IPAMBlock', '10-0-0-0-29', {
    cidr: '10.0.0.0/29',
    affinity: 'host:n1',
    allocations,
    attributes,
    unallocated,
    ...(seq ? { sequenceNumber: seq } : {}),
  });
};
const handle = (id: string) => calico('IPAMHandle', id, { handleID: id, block: { '10.0.0.0/29': 1 } });
const plan = (action: string, desired: KubeObject, live?: KubeObject): IpamPlanned => ({ action: { action }, desired, ...(live ? { live } : {}) });
const pod = (name: string, ip: string, extra: { deleting?: boolean; podIPAnnotation?: string; phase?: string } = {}): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: {
    namespace: 'web',
    name,
    ...(extra.deleting ? { deletionTimestamp: '2026-12-05T10:00:00Z' } : {}),
    ...(extra.podIPAnnotation !== undefined ? { annotations: { 'cni.projectcalico.org/podIP': extra.podIPAnnotation } } : {}),
  },
  status: { phase: extra.phase ?? 'Running', ...(ip ? { podIP: ip, podIPs: [{ ip }] } : {}) },
});
const node = (name: string, vxlan?: string): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Node',
  metadata: { name, annotations: vxlan ? { 'projectcalico.org/IPv4VXLANTunnelAddr': vxlan } : {} },
});
const none = { liveBlocks: async () => [] as KubeObject[], bundleBlocks: async () => [] as KubeObject[] };
const handlesOf = (b: KubeObject): (string | null)[] =>
  (b.spec!.allocations as (number | null)[]).map((a) => (a === null ? null : (b.spec!.attributes[a].handle_id as string)));
const SEQ = 1_733_000_000_000_000_000;

describe('restore: a bundle allocation goes back only when its address is used now', () => {
  // The CRD-loss incident under a running operator (test/e2e/restore-operator.test.ts): the teardown deleted the
  // operator's pods, and each node's tunnel allocator took a new address while IPAM was gone.
  const bundle = () => block(['vxlan-tunnel-addr-n1', 'k8s-pod-network.a', 'k8s-pod-network.gone', 'k8s-pod-network.b', null, null, null, null]);
  const pods = [pod('a', '10.0.0.1'), pod('b', '10.0.0.3')];

  it('creates a lost block without the allocations of pods that are gone, and skips their handles', async () => {
    const use = new AddressUse(pods, [node('n1', '10.0.0.0')]);
    const ps = [plan('create', bundle()), plan('create', handle('k8s-pod-network.a')), plan('create', handle('k8s-pod-network.gone'))];
    await mergeIpamPlan(ps, { ...none, addressUse: async () => use });
    expect(handlesOf(ps[0]!.desired!)).toEqual(['vxlan-tunnel-addr-n1', 'k8s-pod-network.a', null, 'k8s-pod-network.b', null, null, null, null]);
    expect(ps[0]!.desired!.spec!.unallocated).toEqual([4, 5, 6, 7, 2]);
    // The attributes no allocation refers to any more go, as libcalico-go's release leaves a block.
    expect(ps[0]!.desired!.spec!.attributes).toHaveLength(3);
    expect(ps[0]!.action.reason).toMatch(/without 1 allocation/);
    expect(ps.map((p) => p.action.action)).toEqual(['create', 'create', 'skip']);
    expect(use.lines().left.map((l) => [l.kind, l.count])).toEqual([['pod', 1]]);
  });

  it("leaves out a node's old tunnel address when its Node names a new one, keeps it when the Node names the same", async () => {
    const moved = new AddressUse(pods, [node('n1', '10.0.0.6/32')]);
    const ps = [plan('create', bundle())];
    await mergeIpamPlan(ps, { ...none, addressUse: async () => moved });
    expect(handlesOf(ps[0]!.desired!)[0]).toBeNull();
    expect(moved.lines().left.map((l) => [l.kind, l.count])).toEqual([
      ['pod', 1],
      ['tunnel', 1],
    ]);
    const same = new AddressUse(pods, [node('n1', '10.0.0.0')]);
    const kept = [plan('create', bundle())];
    await mergeIpamPlan(kept, { ...none, addressUse: async () => same });
    expect(handlesOf(kept[0]!.desired!)[0]).toBe('vxlan-tunnel-addr-n1');
    // A node gone, or naming no VXLAN address, does not use it either.
    expect(new AddressUse([], [node('n2', '10.0.0.0')]).use({ handle_id: 'vxlan-tunnel-addr-n1' }, '10.0.0.0')).toBe('unused');
    expect(new AddressUse([], [node('n1')]).use({ handle_id: 'vxlan-tunnel-addr-n1' }, '10.0.0.0')).toBe('unused');
  });

  it('merges into a re-created block only the allocations used now (the allocator took 10.0.0.6, pod a runs, pod gone does not)', async () => {
    const recreated = block([null, null, null, null, null, null, 'vxlan-tunnel-addr-n1', null], SEQ + 9_000_000_000);
    const use = new AddressUse(pods, [node('n1', '10.0.0.6')]);
    const ps = [plan('skip', { ...bundle(), spec: { ...bundle().spec, sequenceNumber: SEQ } }, recreated)];
    await mergeIpamPlan(ps, { ...none, addressUse: async () => use });
    expect(ps[0]!.action.action).toBe('update');
    expect(ps[0]!.action.ipam?.ordinals).toEqual([1, 3]);
    expect(use.tally).toMatchObject({ unusedPods: 1, unusedTunnels: 1 });
  });

  it('keeps an allocation whose address a running pod uses, by status or by the CNI plugin annotation, and a deleting pod whose DEL has not run', async () => {
    const use = new AddressUse(
      [
        pod('a', '10.0.0.1'),
        { ...pod('ann', ''), metadata: { namespace: 'web', name: 'ann', annotations: { 'cni.projectcalico.org/podIPs': '10.0.0.2/32' } } },
        pod('stopping', '10.0.0.3', { deleting: true, podIPAnnotation: '10.0.0.3/32' }),
        pod('released', '10.0.0.4', { deleting: true, podIPAnnotation: '' }),
        pod('done', '10.0.0.5', { phase: 'Succeeded' }),
      ],
      [],
    );
    const judge = (ip: string) => use.use({ handle_id: 'k8s-pod-network.x' }, ip);
    expect(['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4', '10.0.0.5', '10.0.0.7'].map(judge)).toEqual(['used', 'used', 'used', 'unused', 'unused', 'unused']);
  });

  it('puts back as before what cannot be judged (pods unreadable, a handle of another IPAM user) and says so', async () => {
    const use = await readAddressUse(
      async () => {
        throw new Error('pods is forbidden');
      },
      async () => [node('n1', '10.0.0.0')],
    );
    const ps = [plan('create', block(['vxlan-tunnel-addr-n1', 'k8s-pod-network.a', 'windows-reserved-ipam-handle', null, null, null, null, null]))];
    await mergeIpamPlan(ps, { ...none, addressUse: async () => use });
    expect(handlesOf(ps[0]!.desired!).slice(0, 3)).toEqual(['vxlan-tunnel-addr-n1', 'k8s-pod-network.a', 'windows-reserved-ipam-handle']);
    expect(use.lines().unjudged).toEqual([{ kind: 'pod', count: 1, line: expect.stringMatching(/pods could not be read \(pods is forbidden\)/) }]);
    // Without an address judgement (none given) the merge puts back everything, as before.
    const plain = [plan('create', bundle())];
    await mergeIpamPlan(plain, none);
    expect(handlesOf(plain[0]!.desired!)).toEqual(handlesOf(bundle()));
  });
});
