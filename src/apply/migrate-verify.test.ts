import { describe, expect, it } from 'vitest';
import { compareIpam, compareResources, missingFields, nodeMapOf } from './migrate-verify.js';

const list = (items: unknown[]) => JSON.stringify({ kind: 'List', items });

describe("the migration's proof that the copy holds what etcd holds", () => {
  it('a field set in etcd must have the same value in the copy; the copy may add defaults', () => {
    expect(missingFields({ cidr: '10.0.0.0/16', disabled: true }, { cidr: '10.0.0.0/16', disabled: true, blockSize: 26 })).toEqual([]);
    expect(missingFields({ disabled: true }, { disabled: false })).toEqual(['spec.disabled']);
    expect(missingFields({ ingress: [{ action: 'Allow' }] }, { ingress: [] })).toEqual(['spec.ingress']);
    expect(missingFields({ a: { b: 1 } }, {})).toEqual(['spec.a']);
  });

  it("names what the copy lacks or holds otherwise, and leaves kube-controllers' knp.default copies out", async () => {
    const etcd: Record<string, unknown[]> = {
      ippools: [{ metadata: { name: 'reserved' }, spec: { cidr: '10.77.0.0/24', disabled: true } }],
      networkpolicies: [
        { metadata: { name: 'default.allow-web', namespace: 'default' }, spec: { selector: "app == 'web'" } },
        { metadata: { name: 'knp.default.from-k8s', namespace: 'default' }, spec: {} },
      ],
      globalnetworkpolicies: [{ metadata: { name: 'default.deny' }, spec: { order: 10 } }],
    };
    const kdd: Record<string, unknown[]> = {
      ippools: [{ metadata: { name: 'reserved' }, spec: { cidr: '10.77.0.0/24', disabled: false } }],
      networkpolicies: [{ metadata: { name: 'default.allow-web', namespace: 'default' }, spec: { selector: "app == 'web'", tier: 'default' } }],
    };
    const got = await compareResources(
      async (kind) => list(etcd[kind] ?? []),
      async (kind) => list(kdd[kind] ?? []),
    );
    expect(got.compared).toBe(3);
    expect(got.problems).toEqual(['ippools reserved: spec.disabled differs', 'globalnetworkpolicies default.deny: not in the Kubernetes datastore']);
  });

  it('IPAM: every allocation, handle and confirmed affinity of etcd must be in the copy, which may hold more', () => {
    const view = (allocations: [string, string][], handles: [string, string][], affinities: string[]) => ({
      allocations: new Map(allocations),
      handles: new Map(handles),
      affinities: new Set(affinities),
    });
    const source = view([['192.168.1.0/26 3', 'k8s-pod-network.a']], [['k8s-pod-network.a', '[["192.168.1.0/26",1]]']], ['node-1 192.168.1.0/26']);
    const same = view(
      [
        ['192.168.1.0/26 3', 'k8s-pod-network.a'],
        ['192.168.1.0/26 0', 'ipip-tunnel-addr-node-1'],
      ],
      [['k8s-pod-network.a', '[["192.168.1.0/26",1]]']],
      ['node-1 192.168.1.0/26'],
    );
    expect(compareIpam(source, same)).toEqual([]);
    const lost = view([], [], []);
    expect(compareIpam(source, lost)).toEqual([
      'IPAM block allocation 192.168.1.0/26 3: k8s-pod-network.a in etcd, free in the copy',
      'IPAM handle k8s-pod-network.a: not the same blocks in the copy',
      'block affinity node-1 192.168.1.0/26: not in the copy',
    ]);
  });

  it("maps each Calico node to its Kubernetes node as calicoctl's export does", () => {
    const nodes = list([
      { metadata: { name: 'calico-1' }, spec: { orchRefs: [{ orchestrator: 'k8s', nodeName: 'node-1' }] } },
      { metadata: { name: 'bare' }, spec: {} },
    ]);
    expect([...nodeMapOf(nodes)]).toEqual([['calico-1', 'node-1']]);
  });
});
