import { describe, expect, it } from 'vitest';
import type { EtcdKv } from '../etcd/gateway.js';
import { ipamRecord } from '../calico/etcd-datastore.js';
import { parseLossless, planEtcdIpam, stringifyLossless } from './etcd-ipam.js';

const BLOCK = '/calico/ipam/v2/assignment/ipv4/block/192.168.137.0-26';
const attr = (handle: string, pod?: string) => ({
  handle_id: handle,
  secondary: pod ? { namespace: 'default', node: 'n1', pod } : { node: 'n1', type: 'ipipTunnelAddress' },
});
/** A libcalico-go AllocationBlock as etcd holds it (v3.28.1 model/block.go), 64-bit sequence numbers included. */
function block(allocs: [number, ReturnType<typeof attr>][], seq: string): string {
  const allocations: (number | null)[] = Array(64).fill(null);
  const attributes = allocs.map(([o, a], i) => ((allocations[o] = i), a));
  const taken = new Set(allocs.map(([o]) => o));
  const unallocated = [...Array(64).keys()].filter((o) => !taken.has(o));
  return `{"cidr":"192.168.137.0/26","affinity":"host:n1","allocations":${JSON.stringify(allocations)},"unallocated":${JSON.stringify(unallocated)},"attributes":${JSON.stringify(attributes)},"sequenceNumber":${seq},"sequenceNumberForAllocation":{${allocs.map(([o]) => `"${o}":${seq}`).join(',')}},"deleted":false}`;
}

/** Keys as a range read of etcd returns them. */
function gateway(live: Record<string, string>): Map<string, EtcdKv> {
  return new Map(Object.entries(live).map(([key, v]) => [key, { key, value: Buffer.from(v), modRevision: '7', createRevision: '3' }]));
}

async function* records(list: [string, string][]) {
  for (const [k, raw] of list) yield { object: ipamRecord(k, raw) };
}

describe('etcd IPAM values without losing 64-bit integers', () => {
  it('parses and writes back a sequence number exactly, and leaves digits inside strings alone', () => {
    const raw = '{"a":1796638193357450117,"b":[1796638193357450118, 3],"c":"id 17966381933574501170","d":1.5}';
    const v = parseLossless(raw);
    expect(v.c).toBe('id 17966381933574501170');
    expect(stringifyLossless(v)).toBe(raw.replace(', 3', ',3'));
  });
});

describe('planEtcdIpam', () => {
  const tunnel = attr('ipip-tunnel-addr-n1');
  const web1 = attr('k8s-pod-network.aaa', 'web-1');
  const web2 = attr('k8s-pod-network.bbb', 'web-2');
  const bundleBlock = block(
    [
      [0, tunnel],
      [1, web1],
      [2, web2],
    ],
    '1796638193357450117',
  );

  it('gives a re-claimed block the allocations of pods that still run back, exactly, and reports none as duplicate', async () => {
    const live = { [BLOCK]: block([[0, tunnel]], '1796638999999999999') };
    const { decisions, duplicates } = await planEtcdIpam(gateway(live), records([[BLOCK, bundleBlock]]), async (_ns, pod) => pod === 'web-1');
    expect(duplicates).toEqual([]);
    const d = decisions.find((x) => x.key === BLOCK)!;
    expect(d.action).toBe('update');
    expect(d.modRevision).toBe('7');
    const merged = parseLossless(d.value);
    expect(merged.allocations.slice(0, 3)).toEqual([0, 1, null]); // web-2's pod is gone: its address stays free
    expect(merged.attributes[1].handle_id).toBe('k8s-pod-network.aaa');
    expect(merged.unallocated).not.toContain(1);
    expect(d.value).toContain('"sequenceNumber":1796638999999999999');
    expect(d.value).toContain('"1":1796638193357450117');
  });

  it('reports an address another handle holds now as a duplicate IP and never overwrites it', async () => {
    const live = {
      [BLOCK]: block(
        [
          [0, tunnel],
          [1, attr('k8s-pod-network.new', 'web-9')],
        ],
        '1796638999999999999',
      ),
    };
    const { decisions, duplicates } = await planEtcdIpam(gateway(live), records([[BLOCK, bundleBlock]]), async () => true);
    expect(duplicates).toHaveLength(1);
    expect(duplicates[0]).toContain('duplicate IP 192.168.137.1');
    expect(parseLossless(decisions[0]!.value).attributes[parseLossless(decisions[0]!.value).allocations[1]].handle_id).toBe('k8s-pod-network.new');
  });

  it('creates a missing block as its exact text, and a handle only while an allocation of it is kept', async () => {
    const h1 = '/calico/ipam/v2/handle/k8s-pod-network.aaa';
    const h2 = '/calico/ipam/v2/handle/k8s-pod-network.bbb';
    const { decisions } = await planEtcdIpam(
      gateway({}),
      records([
        [BLOCK, bundleBlock],
        [h1, '{"handleID":"k8s-pod-network.aaa","block":{"192.168.137.0/26":1},"deleted":false}'],
        [h2, '{"handleID":"k8s-pod-network.bbb","block":{"192.168.137.0/26":1},"deleted":false}'],
      ]),
      async (_ns, pod) => pod !== 'web-2',
    );
    const by = new Map(decisions.map((d) => [d.key, d]));
    expect(by.get(BLOCK)!.action).toBe('create');
    expect(by.get(BLOCK)!.value).toContain('1796638193357450117');
    expect(by.get(h1)!.action).toBe('create');
    expect(by.get(h2)!.action).toBe('skip');
  });
});
