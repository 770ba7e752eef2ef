import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../../src/kube/types.js';
import { judgePodAddresses, podAddresses } from './pod-addresses.js';

function pod(name: string, ip: string | undefined, extra: { cid?: string; cniIp?: string; phase?: string; hostNetwork?: boolean } = {}): KubeObject {
  const annotations: Record<string, string> = {};
  if (extra.cid) annotations['cni.projectcalico.org/containerID'] = extra.cid;
  if (extra.cniIp) annotations['cni.projectcalico.org/podIP'] = `${extra.cniIp}/32`;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'ns', annotations },
    spec: { hostNetwork: extra.hostNetwork },
    status: { phase: extra.phase ?? 'Running', podIP: ip },
  };
}
const POOLS = ['192.168.0.0/16'];

describe('judgePodAddresses', () => {
  it('passes pods whose Calico addresses are held by their own handles, and ignores addresses outside the pools', () => {
    const addrs = podAddresses([pod('a', '192.168.1.1', { cid: 'c1', cniIp: '192.168.1.1' }), pod('kwok', '10.244.0.5')]);
    const owners = new Map([['192.168.1.1', ['k8s-pod-network.c1']]]);
    expect(judgePodAddresses(addrs, owners, POOLS)).toEqual({ problems: [], judged: 1 });
  });

  it('names a running pod whose address is free in IPAM', () => {
    const addrs = podAddresses([pod('a', '192.168.1.1', { cid: 'c1', cniIp: '192.168.1.1' })]);
    expect(judgePodAddresses(addrs, new Map(), POOLS).problems).toEqual(['192.168.1.1 of running pod ns/a is free in IPAM (the next pod can get it)']);
    // Given by the CNI plugin: judged even when no pool lists it any more (a pool lost with its CRD).
    expect(judgePodAddresses(addrs, new Map(), []).judged).toBe(1);
  });

  it('names two pods with one address, an address allocated twice, and one held by another handle', () => {
    const addrs = podAddresses([
      pod('a', '192.168.1.1', { cid: 'c1', cniIp: '192.168.1.1' }),
      pod('b', '192.168.1.1', { cid: 'c2', cniIp: '192.168.1.1' }),
      pod('c', '192.168.1.3', { cid: 'c3', cniIp: '192.168.1.3' }),
    ]);
    const owners = new Map([
      ['192.168.1.1', ['k8s-pod-network.c1']],
      ['192.168.1.3', ['k8s-pod-network.c9', 'k8s-pod-network.c3']],
    ]);
    const { problems } = judgePodAddresses(addrs, owners, POOLS);
    expect(problems).toEqual([
      '192.168.1.1 is the address of 2 pods: ns/a, ns/b',
      '192.168.1.1 of pod ns/b is allocated to k8s-pod-network.c1, not to its own handle k8s-pod-network.c2',
      '192.168.1.3 of pod ns/c is allocated 2 times: k8s-pod-network.c9, k8s-pod-network.c3',
    ]);
  });

  it('leaves out finished, deleting and host-network pods', () => {
    const gone = { ...pod('d', '192.168.1.4'), metadata: { ...pod('d', '192.168.1.4').metadata, deletionTimestamp: '2026-01-01T00:00:00Z' } };
    const addrs = podAddresses([pod('a', '192.168.1.1', { phase: 'Succeeded' }), pod('h', '127.0.1.1', { hostNetwork: true }), gone]);
    expect(addrs).toEqual([]);
  });
});
