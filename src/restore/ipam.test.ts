import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../kube/types.js';
import { allocatesTo, mergeIpamPlan, type IpamPlanned } from './ipam.js';

const calico = (kind: string, name: string, spec: unknown): KubeObject => ({ apiVersion: 'crd.projectcalico.org/v1', kind, metadata: { name }, spec });
/** A /30 block: ordinals 0-3, each allocated to the handle at that position (null = free). */
const block = (cidr: string, handles: (string | null)[], affinity = 'host:n1') => {
  const attributes: { handle_id: string }[] = [];
  const allocations = handles.map((h) => (h === null ? null : attributes.push({ handle_id: h }) - 1));
  return calico('IPAMBlock', cidr.replace(/[./]/g, '-'), { cidr, affinity, allocations, attributes, unallocated: [] });
};
const handle = (id: string, cidr: string) => calico('IPAMHandle', id, { handleID: id, block: { [cidr]: 1 } });
const affinity = (node: string, cidr: string) => calico('BlockAffinity', `${node}-${cidr.replace(/[./]/g, '-')}`, { node, cidr, state: 'confirmed' });
const plan = (action: string, desired: KubeObject, live?: KubeObject): IpamPlanned => ({ action: { action }, desired, ...(live ? { live } : {}) });
const none = { liveBlocks: async () => [] as KubeObject[], bundleBlocks: async () => [] as KubeObject[] };

describe('restore: IPAM is merged, never overwritten', () => {
  it('keeps a live block that changed since the backup, whatever --existing asked (update, replace, skip)', async () => {
    for (const a of ['update', 'replace', 'skip']) {
      const p = plan(a, block('10.0.0.0/30', ['h1', null]), block('10.0.0.0/30', ['h1', 'h2']));
      expect(await mergeIpamPlan([p], none)).toBe(1);
      expect(p.action.action).toBe('skip');
      expect(p.action.reason).toMatch(/IPAM is live state/);
    }
  });

  it('reads a block once and a handle or affinity twice (its kind, then its judgement), holding none but the blocks parsed (a plan of 100k objects keeps them as JSON text)', async () => {
    let reads = 0;
    const counted = (p: IpamPlanned): IpamPlanned => {
      const desired = p.desired;
      return Object.defineProperty({ ...p }, 'desired', { get: () => (reads++, desired), enumerable: true });
    };
    const ps = [
      plan('create', block('10.0.0.4/30', ['h1', null])),
      plan('create', handle('h1', '10.0.0.4/30')),
      plan('create', affinity('n1', '10.0.0.4/30')),
    ].map(counted);
    expect(await mergeIpamPlan(ps, none)).toBe(0);
    // Each object once for its kind; a handle and an affinity once more where the merge judges them (five times each
    // before: every loop of the merge parsed them again to learn their kind).
    expect(reads).toBe(3 + 2);
  });

  it("learns an entry's kind from its ref when it has one: a handle or affinity is parsed only where the merge judges it", async () => {
    let reads = 0;
    const counted = (p: IpamPlanned): IpamPlanned => {
      const desired = p.desired!;
      const withRef = { ...p, action: { ...p.action, ref: { apiVersion: desired.apiVersion, kind: desired.kind } } };
      return Object.defineProperty(withRef, 'desired', { get: () => (reads++, desired), enumerable: true });
    };
    const ps = [
      plan('create', block('10.0.0.4/30', ['h1', null])),
      plan('create', handle('h1', '10.0.0.4/30')),
      plan('create', affinity('n1', '10.0.0.4/30')),
      plan('create', { apiVersion: 'crd.projectcalico.org/v1', kind: 'IPPool', metadata: { name: 'p' }, spec: {} }),
    ].map(counted);
    expect(await mergeIpamPlan(ps, none)).toBe(0);
    // The block once (blocks are kept parsed), the handle and the affinity once each for their judgement, the pool never.
    expect(reads).toBe(3);
  });

  it('creates a block the cluster lacks, and its handles and affinity', async () => {
    const ps = [plan('create', block('10.0.0.4/30', ['h1', 'h2'])), plan('create', handle('h1', '10.0.0.4/30')), plan('create', affinity('n1', '10.0.0.4/30'))];
    expect(await mergeIpamPlan(ps, none)).toBe(0);
    expect(ps.map((p) => p.action.action)).toEqual(['create', 'create', 'create']);
  });

  it('does not re-create a handle released since the backup (the live block no longer allocates to it)', async () => {
    const live = block('10.0.0.0/30', ['h1', 'h3']);
    const released = plan('create', handle('h2', '10.0.0.0/30'));
    const held = plan('create', handle('h3', '10.0.0.0/30')); // its handle object lost, its allocation live
    const ps = [plan('update', block('10.0.0.0/30', ['h1', 'h2']), live), released, held];
    expect(await mergeIpamPlan(ps, none)).toBe(2);
    expect(released.action).toMatchObject({ action: 'skip', reason: expect.stringMatching(/released since the backup/) });
    expect(held.action.action).toBe('create');
  });

  it("reads the live blocks when a handle's block is not in the bundle", async () => {
    let reads = 0;
    const live = async () => (reads++, [block('10.0.0.8/30', ['h9'])]);
    const ps = [plan('create', handle('h9', '10.0.0.8/30')), plan('create', handle('h8', '10.0.0.8/30'))];
    await mergeIpamPlan(ps, { liveBlocks: live, bundleBlocks: async () => [block('10.0.0.8/30', ['h8'])] });
    expect(ps.map((p) => p.action.action)).toEqual(['create', 'skip']);
    expect(reads).toBe(1);
  });

  it('re-creates handles lost while their block stayed as in the bundle (the IPAMHandle CRD deleted: lost, not released)', async () => {
    // A handle whose block does not allocate to it (a leaked handle at the backup) is brought back as it was.
    const same = block('10.0.0.0/30', ['h1']);
    const ps = [plan('create', handle('h1', '10.0.0.0/30')), plan('create', handle('leaked', '10.0.0.0/30'))];
    expect(await mergeIpamPlan(ps, { liveBlocks: async () => [same], bundleBlocks: async () => [block('10.0.0.0/30', ['h1'])] })).toBe(0);
    expect(ps.map((p) => p.action.action)).toEqual(['create', 'create']);
    // The same block changed since (h1 released, h2 allocated): the leaked handle stays gone.
    const changed = [plan('create', handle('leaked', '10.0.0.0/30'))];
    expect(await mergeIpamPlan(changed, { liveBlocks: async () => [block('10.0.0.0/30', ['h2'])], bundleBlocks: async () => [same] })).toBe(1);
  });

  it('creates a lost affinity of a live block only for the node the block is affine to', async () => {
    const liveBlock = block('10.0.0.0/30', ['h1'], 'host:n2');
    const ps = [plan('unchanged', liveBlock, liveBlock), plan('create', affinity('n1', '10.0.0.0/30')), plan('create', affinity('n2', '10.0.0.0/30'))];
    await mergeIpamPlan(ps, none);
    expect(ps.map((p) => p.action.action)).toEqual(['unchanged', 'skip', 'create']);
  });

  // Issue 29's first scenario: the IPAM objects lost, calico-node re-claimed the same CIDR (libcalico-go seeds a
  // node's first block from its hostname) and allocated its tunnel address there; every pod's allocation is gone.
  const SEQ = 1_733_000_000_000_000_000; // a block's sequenceNumber starts at its creation time in ns (past 2^53 numbers are exact in steps of 256)
  const withSeq = (b: KubeObject, seq: number) => ({ ...b, spec: { ...b.spec, sequenceNumber: seq } });

  it('puts the bundle allocations back into a block Calico re-created after the backup, address by address', async () => {
    const bundle = withSeq(block('10.0.0.0/30', ['tunnel-n1', 'pod-a', 'pod-b', null]), SEQ + 40 * 256);
    const recreated = withSeq(block('10.0.0.0/30', ['tunnel-n1', null, null, null]), SEQ + 60_000_000_000 + 1);
    const ps = [plan('update', bundle, recreated), plan('create', handle('pod-a', '10.0.0.0/30')), plan('create', handle('pod-b', '10.0.0.0/30'))];
    await mergeIpamPlan(ps, none);
    expect(ps.map((p) => p.action.action)).toEqual(['update', 'create', 'create']);
    expect(ps[0]!.action.ipam).toEqual({ ordinals: [1, 2] });
    // Into a block the cluster has, which Calico keeps writing: the write checks the allocation is still there.
    expect(ps.slice(1).map((p) => p.action.ipam)).toEqual([{ recheck: ['10-0-0-0-30'] }, { recheck: ['10-0-0-0-30'] }]);
    // Into a block this restore creates, or a live block that still has the allocation (the handles lost, the blocks
    // kept: faults.test.ts's restore of 3,000 handles): nothing to check, no read per handle.
    const fresh = [plan('create', block('10.0.0.4/30', ['pod-c', null, null, null])), plan('create', handle('pod-c', '10.0.0.4/30'))];
    await mergeIpamPlan(fresh, none);
    expect(fresh[1]!.action.ipam).toBeUndefined();
    const intact = block('10.0.0.8/30', ['pod-d', null, null, null]);
    const kept = [plan('unchanged', intact, intact), plan('create', handle('pod-d', '10.0.0.8/30'))];
    await mergeIpamPlan(kept, none);
    expect(kept.map((p) => [p.action.action, p.action.ipam])).toEqual([
      ['unchanged', undefined],
      ['create', undefined],
    ]);
  });

  it('reports a bundle allocation whose address another handle holds now as a duplicate IP, naming the pod to restart', async () => {
    const bundle = withSeq(block('10.0.0.0/30', ['tunnel-n1', 'pod-a', 'pod-b', null]), SEQ);
    const recreated = withSeq(block('10.0.0.0/30', ['tunnel-n1', 'pod-new', null, null]), SEQ + 5_000_000_000);
    bundle.spec.attributes[1].secondary = { namespace: 'web', pod: 'a-1' };
    const ps = [plan('skip', bundle, recreated), plan('create', handle('pod-a', '10.0.0.0/30')), plan('create', handle('pod-b', '10.0.0.0/30'))];
    await mergeIpamPlan(ps, none);
    expect(ps.map((p) => p.action.action)).toEqual(['update', 'skip', 'create']);
    expect(ps[0]!.action.ipam?.ordinals).toEqual([2]);
    expect(ps[0]!.action.ipam?.duplicates).toEqual([
      expect.stringMatching(/^duplicate IP 10\.0\.0\.1: .*pod-a \(pod web\/a-1\).*pod-new.*restart pod web\/a-1/),
    ]);
    expect(ps[1]!.action.reason).toMatch(/10\.0\.0\.1 is held by another handle now/);
  });

  // node-side-night.test.ts (a rehearsal): a calico-apiserver pod's CNI ADD took a bundle pod's address, failed on
  // that pod's route still on the node, and released it 0.6 s later; restore had read the block in between.
  it('reads a block with a duplicate again a moment later: an address the CNI plugin held only while its ADD failed goes back to the bundle pod', async () => {
    const bundle = withSeq(block('10.0.0.0/30', ['tunnel-n1', 'pod-a', 'pod-b', null]), SEQ);
    bundle.spec.attributes[1].secondary = { namespace: 'web', pod: 'a-1' };
    const inFlight = withSeq(block('10.0.0.0/30', ['tunnel-n1', 'k8s-pod-network.adding', null, null]), SEQ + 5_000_000_000);
    const released = withSeq(block('10.0.0.0/30', ['tunnel-n1', null, null, null]), SEQ + 5_000_000_000 + 2);
    const rereads: string[] = [];
    const ps = [plan('skip', bundle, inFlight), plan('create', handle('pod-a', '10.0.0.0/30')), plan('create', handle('pod-b', '10.0.0.0/30'))];
    await mergeIpamPlan(ps, { ...none, settleMs: 5, rereadBlock: async (b) => (rereads.push(b.metadata.name), released) });
    expect(rereads).toEqual(['10-0-0-0-30']);
    expect(ps.map((p) => p.action.action)).toEqual(['update', 'create', 'create']);
    expect(ps[0]!.action.ipam).toEqual({ ordinals: [1, 2] });
    expect(ps[0]!.live).toBe(released);

    // Still held when read again: a duplicate IP, as before.
    const held = [plan('skip', bundle, inFlight), plan('create', handle('pod-a', '10.0.0.0/30'))];
    await mergeIpamPlan(held, { ...none, settleMs: 5, rereadBlock: async () => inFlight });
    expect(held[0]!.action.ipam?.duplicates).toEqual([expect.stringMatching(/^duplicate IP 10\.0\.0\.1: .*restart pod web\/a-1/)]);
    expect(held[1]!.action.action).toBe('skip');
  });

  // node-side-night.test.ts (rehearsals, about 1 in 4): the kubelet retries a failing ADD with the same container ID
  // every few seconds and each try takes the next free ordinal, a running bundle pod's address; the second reading
  // met the next try at the next address and restore kept that one as a duplicate (exit 3, the pod's address free).
  it('a duplicate is the same handle at the same address in both readings: an ADD that moved on is planned for the write', async () => {
    const bundle = withSeq(block('10.0.0.0/30', ['tunnel-n1', 'pod-a', 'pod-b', null]), SEQ);
    bundle.spec.attributes[2].secondary = { namespace: 'web', pod: 'b-1' };
    const first = withSeq(block('10.0.0.0/30', ['tunnel-n1', 'k8s-pod-network.retry', null, null]), SEQ + 5_000_000_000);
    const second = withSeq(block('10.0.0.0/30', ['tunnel-n1', null, 'k8s-pod-network.retry', null]), SEQ + 5_000_000_000 + 2);
    const ps = [plan('skip', bundle, first), plan('create', handle('pod-a', '10.0.0.0/30')), plan('create', handle('pod-b', '10.0.0.0/30'))];
    await mergeIpamPlan(ps, { ...none, settleMs: 5, rereadBlock: async () => second });
    expect(ps[0]!.action.action).toBe('update');
    expect(ps[0]!.action.ipam).toEqual({ ordinals: [1, 2] });
    expect(ps[0]!.action.reason).toMatch(/2 allocation\(s\) of the bundle put back .* \(1 of them held by a CNI ADD in flight when read/);
    // Both handles are created only if their block allocates to them when they are written (ipam-write.ts).
    expect(ps.slice(1).map((p) => [p.action.action, p.action.ipam?.recheck])).toEqual([
      ['create', ['10-0-0-0-30']],
      ['create', ['10-0-0-0-30']],
    ]);

    // Another handle at that address in the second reading only is planned too; the same handle in both is a duplicate.
    const other = withSeq(block('10.0.0.0/30', ['tunnel-n1', 'k8s-pod-network.other', 'k8s-pod-network.retry', null]), SEQ + 5_000_000_000 + 4);
    const held = [plan('skip', bundle, second), plan('create', handle('pod-a', '10.0.0.0/30')), plan('create', handle('pod-b', '10.0.0.0/30'))];
    await mergeIpamPlan(held, { ...none, settleMs: 5, rereadBlock: async () => other });
    expect(held[0]!.action.ipam?.ordinals).toEqual([1]);
    expect(held[0]!.action.ipam?.duplicates).toEqual([expect.stringMatching(/^duplicate IP 10\.0\.0\.2: .*pod-b \(pod web\/b-1\).*retry/)]);
    expect(held.slice(1).map((p) => p.action.action)).toEqual(['create', 'skip']);
  });

  // The seed's night on the node side (test/e2e/node-side-night.test.ts): the operator's teardown deleted its own
  // pods (calico-apiserver, calico-kube-controllers, csi-node-driver); after the reinstall their successors got the
  // lowest free addresses of the re-claimed blocks, which the bundle still gives to the deleted pods.
  it('does not call an address a duplicate when the bundle pod that held it is gone (deleted, or the same name in a new sandbox)', async () => {
    const bundle = withSeq(block('10.0.0.0/30', ['tunnel-n1', 'k8s-pod-network.old1', 'k8s-pod-network.old2', 'k8s-pod-network.kept']), SEQ);
    const recreated = withSeq(block('10.0.0.0/30', ['tunnel-n1', 'k8s-pod-network.n1', 'k8s-pod-network.n2', 'k8s-pod-network.n3']), SEQ + 5_000_000_000);
    bundle.spec.attributes[1].secondary = { namespace: 'calico-apiserver', pod: 'calico-apiserver-db7dd8dcf-86rkf' };
    bundle.spec.attributes[2].secondary = { namespace: 'web', pod: 'db-0' };
    bundle.spec.attributes[3].secondary = { namespace: 'web', pod: 'a-1' };
    const pod = (namespace: string, name: string, containerID: string): KubeObject => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { namespace, name, annotations: { 'cni.projectcalico.org/containerID': containerID } },
    });
    // db-0 runs again with another sandbox (a StatefulSet pod re-created): its old handle was released.
    const livePods = async () => [pod('web', 'db-0', 'new0'), pod('web', 'a-1', 'kept')];
    const ps = [
      plan('skip', bundle, recreated),
      plan('create', handle('k8s-pod-network.old1', '10.0.0.0/30')),
      plan('create', handle('k8s-pod-network.old2', '10.0.0.0/30')),
      plan('create', handle('k8s-pod-network.kept', '10.0.0.0/30')),
    ];
    await mergeIpamPlan(ps, { ...none, livePods });
    expect(ps[0]!.action.ipam?.duplicates).toEqual([expect.stringMatching(/^duplicate IP 10\.0\.0\.3: .*restart pod web\/a-1/)]);
    expect(ps.slice(1).map((p) => p.action.reason)).toEqual([
      expect.stringMatching(/^released since the backup/),
      expect.stringMatching(/^released since the backup/),
      expect.stringMatching(/10\.0\.0\.3 is held by another handle now/),
    ]);
  });

  // node-side-night.test.ts: a node's tunnel allocator moved its address into new-ipv4-pool before the backup; after
  // the loss and the reinstall it holds a 192.168 address under the same handle, which the cluster's IPAMHandle counts.
  it("raises a live handle's counts to the blocks this restore creates with its allocations (else a release by handle misses them)", async () => {
    const live = calico('IPAMHandle', 'vxlan-tunnel-addr-n1', { handleID: 'vxlan-tunnel-addr-n1', block: { '192.168.0.0/30': 1 } });
    const inBundle = handle('vxlan-tunnel-addr-n1', '10.100.0.0/30');
    const created = block('10.100.0.0/30', ['vxlan-tunnel-addr-n1', 'pod-a', null, null]);
    const same = calico('IPAMHandle', 'pod-b', { handleID: 'pod-b', block: { '10.0.0.0/30': 1 } });
    const ps = [plan('create', created), plan('skip', inBundle, live), plan('skip', handle('pod-b', '10.0.0.0/30'), same)];
    await mergeIpamPlan(ps, { ...none, liveBlocks: async () => [block('10.0.0.0/30', ['pod-b', null, null, null])] });
    expect(ps.map((p) => p.action.action)).toEqual(['create', 'update', 'skip']);
    expect(ps[1]!.action.reason).toMatch(/10\.100\.0\.0\/30/);
  });

  it('keeps a block that only changed since the backup (same block: its sequenceNumber grew by its writes)', async () => {
    const bundle = withSeq(block('10.0.0.0/30', ['pod-a', 'pod-b']), SEQ);
    const live = withSeq(block('10.0.0.0/30', ['pod-a', null, 'pod-c']), SEQ + 3 * 256);
    const p = plan('update', bundle, live);
    await mergeIpamPlan([p], none);
    expect(p.action).toMatchObject({ action: 'skip', reason: expect.stringMatching(/IPAM is live state/) });
  });

  it('creates a lost LoadBalancer affinity (3.30+: type virtual) of a live block affine to virtual:load-balancer', async () => {
    const lb = block('10.0.1.0/30', ['lb-svc'], 'virtual:load-balancer');
    const lost = calico('BlockAffinity', 'load-balancer-10-0-1-0-30', { node: 'load-balancer', type: 'virtual', cidr: '10.0.1.0/30', state: 'confirmed' });
    const ps = [plan('unchanged', lb, lb), plan('create', lost)];
    await mergeIpamPlan(ps, none);
    expect(ps.map((p) => p.action.action)).toEqual(['unchanged', 'create']);
  });

  it('leaves other kinds alone', async () => {
    const pool = plan('update', calico('IPPool', 'p', { cidr: '10.0.0.0/8' }), calico('IPPool', 'p', { cidr: '10.0.0.0/16' }));
    const config = plan('update', calico('IPAMConfig', 'default', { strictAffinity: true }), calico('IPAMConfig', 'default', {}));
    expect(await mergeIpamPlan([pool, config], none)).toBe(0);
    expect([pool.action.action, config.action.action]).toEqual(['update', 'update']);
  });

  it('allocatesTo reads allocations through the attribute indexes', () => {
    expect(allocatesTo(block('10.0.0.0/30', [null, 'h1']), 'h1')).toBe(true);
    expect(allocatesTo(block('10.0.0.0/30', [null, 'h1']), 'h2')).toBe(false);
    expect(allocatesTo(undefined, 'h1')).toBe(false);
  });
});
