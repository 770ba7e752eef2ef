/**
 * The doctor's IPAM findings use calicoctl ipam check's definitions (calicoctl 3.28.1 commands/ipam/check.go), on
 * IPAM objects shaped as libcalico-go writes them (test/support/doctor-state.ts).
 */
import { describe, expect, it } from 'vitest';
import { IPAM_RELEASE_RECIPE } from '../../calico/knowledge.js';
import type { KubeObject } from '../../kube/types.js';
import { affinity, block, handle, makeState, pool, podAt } from '../../../test/support/doctor-state.js';
import { runChecks } from '../doctor.js';
import { allocatesAnyOf, inUseAddresses, podAddressesVsPools } from './ipam.js';
import { toNodeInfo } from '../state.js';

const ipamFindings = (objects: KubeObject[], pods: ReturnType<typeof podAt>[], tunnelIPs: Record<string, string[]> = {}) => {
  const st = makeState({ objects: [pool('p', '10.244.0.0/16'), affinity('n1', '10.244.0.0/26'), ...objects], pods });
  st.nodes = ['n1', 'n2'].map((name) => ({ name, ready: true, tunnelIPs: tunnelIPs[name] ?? [] }));
  return runChecks(st).filter((f) => f.id.startsWith('ipam-'));
};

describe('IPAM findings with calicoctl ipam check definitions', () => {
  it('a leak is judged by address: a live pod named in the attributes does not keep an address it no longer holds', () => {
    // web-1 was re-created with another address; its old allocation still names it.
    const fs = ipamFindings(
      [
        block('10.244.0.0/26', 'n1', [
          { ordinal: 1, handle: 'k8s-pod-network.old', pod: ['default', 'web-1'] },
          { ordinal: 2, handle: 'k8s-pod-network.new', pod: ['default', 'web-1'] },
        ]),
        handle('k8s-pod-network.old', '10.244.0.0/26'),
        handle('k8s-pod-network.new', '10.244.0.0/26'),
      ],
      [podAt('default', 'web-1', 'n1', '10.244.0.2')],
    );
    expect(fs.map((f) => f.id)).toEqual(['ipam-handle-without-pod']);
    expect(fs[0]!.objects).toEqual(['IPAMHandle/k8s-pod-network.old (pod default/web-1) holds 10.244.0.1']);
  });

  it('a LoadBalancer IPAM affinity (3.30+: type virtual, node load-balancer) is no node gone missing', () => {
    const lb = { ...affinity('load-balancer', '10.244.1.0/26') };
    lb.spec = { ...lb.spec, type: 'virtual' };
    expect(ipamFindings([lb], []).filter((f) => f.id === 'ipam-block-affinity-missing-node')).toEqual([]);
  });

  it("a node's tunnel address is in use when the node's annotation holds it, leaked when not", () => {
    const objects = [block('10.244.0.0/26', 'n1', [{ ordinal: 0, handle: 'vxlan-tunnel-addr-n1' }]), handle('vxlan-tunnel-addr-n1', '10.244.0.0/26')];
    expect(ipamFindings(objects, [], { n1: ['10.244.0.0'] })).toEqual([]);
    const fs = ipamFindings(objects, [], { n1: ['10.244.0.5'] });
    expect(fs.map((f) => f.objects)).toEqual([['IPAMHandle/vxlan-tunnel-addr-n1 holds 10.244.0.0']]);
    // Read from the annotation libcalico-go writes on the Kubernetes Node.
    const node: KubeObject = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: 'n1', annotations: { 'projectcalico.org/IPv4VXLANTunnelAddr': '10.244.0.0' } },
    };
    expect(toNodeInfo(node).tunnelIPs).toEqual(['10.244.0.0']);
  });

  it('leaked handles (no block allocates to them) and missing handles (a block names a handle with no object)', () => {
    const fs = ipamFindings(
      [
        block('10.244.0.0/26', 'n1', [{ ordinal: 3, handle: 'k8s-pod-network.nohandle', pod: ['default', 'a'] }]),
        handle('k8s-pod-network.empty', '10.244.0.0/26'),
      ],
      [podAt('default', 'a', 'n1', '10.244.0.3')],
    );
    expect(fs.map((f) => [f.id, f.severity, f.objects])).toEqual([
      ['ipam-handle-leaked', 'warning', ['IPAMHandle/k8s-pod-network.empty']],
      ['ipam-handle-missing', 'info', ['IPAMHandle/k8s-pod-network.nohandle (in IPAMBlock/10-244-0-0-26: 10.244.0.3)']],
    ]);
  });

  it('prints the release recipe in the order calicoctl accepts: lock, check, release, unlock', () => {
    const fs = ipamFindings(
      [
        block('10.244.0.0/26', 'n1', [{ ordinal: 4, handle: 'k8s-pod-network.gone', pod: ['default', 'gone'] }]),
        handle('k8s-pod-network.gone', '10.244.0.0/26'),
      ],
      [],
    );
    const fix = fs.find((f) => f.id === 'ipam-handle-without-pod')!.fix;
    const at = IPAM_RELEASE_RECIPE.map((line) => fix.indexOf(line));
    expect(at.every((i) => i >= 0)).toBe(true);
    expect([...at].sort((a, b) => a - b)).toEqual(at);
    expect(IPAM_RELEASE_RECIPE[0]).toBe('calicoctl datastore migrate lock');
  });

  it('"in use but not allocated" counts what calicoctl counts: node tunnel addresses and pods known only by their Calico annotation', () => {
    const st = makeState({
      objects: [pool('p', '10.244.0.0/16'), pool('old', '10.99.0.0/16', { disabled: true }), affinity('n1', '10.244.0.0/26')],
      pods: [
        podAt('default', 'starting', 'n1', '', { podIPs: [], phase: 'Pending', calicoAnnotations: { 'cni.projectcalico.org/podIPs': '10.244.0.9/32' } }),
        podAt('default', 'parked', 'n1', '10.99.0.4'),
      ],
    });
    st.nodes = [{ name: 'n1', ready: true, tunnelIPs: ['10.244.0.1'] }];
    const f = runChecks(st).find((x) => x.id === 'pod-ip-not-allocated')!;
    expect(f.severity).toBe('error');
    expect(f.objects).toEqual(['Node/n1 (10.244.0.1)', 'Pod/default/parked (10.99.0.4, disabled pool old)', 'Pod/default/starting (10.244.0.9)']);
  });

  it('pod-ip-not-allocated needs only the blocks that allocate an address in use (what restore reads back)', () => {
    const blocks = [
      block('10.244.0.0/26', 'n1', [{ ordinal: 2, handle: 'k8s-pod-network.a', pod: ['default', 'a'] }]),
      block('10.244.0.64/26', 'n1', [{ ordinal: 1, handle: 'k8s-pod-network.other', pod: ['default', 'gone'] }]),
      block('10.244.1.0/26', 'n2', [{ ordinal: 5, handle: 'vxlan-tunnel-addr-n2' }]),
    ];
    const pods = [podAt('default', 'a', 'n1', '10.244.0.2'), podAt('default', 'b', 'n1', '10.244.0.70')];
    const state = (objects: KubeObject[]) => {
      const st = makeState({ objects: [pool('p', '10.244.0.0/16'), ...objects], pods });
      st.nodes = [{ name: 'n2', ready: true, tunnelIPs: ['10.244.1.5'] }];
      return st;
    };
    const inUse = new Set(inUseAddresses(state([]).pods!, state([]).nodes!).keys());
    const kept = blocks.filter((b) => allocatesAnyOf(b, inUse));
    expect(kept.map((b) => b.spec!.cidr)).toEqual(['10.244.0.0/26', '10.244.1.0/26']);
    const finding = (objects: KubeObject[]) => podAddressesVsPools.run(state(objects), {}).find((f) => f.id === 'pod-ip-not-allocated')?.objects;
    expect(finding(kept)).toEqual(['Pod/default/b (10.244.0.70)']);
    expect(finding(kept)).toEqual(finding(blocks));
    expect(allocatesAnyOf(blocks[0]!, new Set())).toBe(false);
  });
});
