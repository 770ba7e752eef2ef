/**
 * Judging pods' addresses against IPAM, for the check every IPAM-touching end-to-end test ends with (issue 29,
 * test/e2e/pod-ip-support.ts): no two running pods share an address, and every running pod whose address Calico gave
 * (the CNI plugin's `cni.projectcalico.org/podIP` annotation) or that lies in an IP pool is allocated in IPAM to that
 * pod's own handle (`k8s-pod-network.<containerID>`, as the CNI plugin names it: cni-plugin/pkg/ipamplugin). Pure
 * functions, so their unit test shows they fail on each kind of harm.
 */
import type { KubeObject } from '../../src/kube/types.js';

export interface PodAddress {
  pod: string;
  ip: string;
  /** The handle the CNI plugin allocated it under, when the plugin annotated the pod. */
  handle?: string;
  /** True when the CNI plugin gave the address (its podIP annotation), so IPAM must hold it. */
  fromCni: boolean;
}

const ipToInt = (ip: string) => ip.split('.').reduce((a, o) => a * 256 + Number(o), 0);
function inCidr(ip: string, cidr: string): boolean {
  const [base, bits] = cidr.split('/');
  if (!ip.includes('.') || !base?.includes('.')) return false;
  const size = 2 ** (32 - Number(bits));
  const start = ipToInt(base) - (ipToInt(base) % size);
  return ipToInt(ip) >= start && ipToInt(ip) < start + size;
}

/** The addresses of the pods that are running or starting (not finished, not host-network), one entry per address. */
export function podAddresses(pods: KubeObject[]): PodAddress[] {
  const out: PodAddress[] = [];
  for (const p of pods) {
    if (p.spec?.hostNetwork || p.metadata.deletionTimestamp) continue;
    if (p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed') continue;
    const ips: string[] = (p.status?.podIPs ?? []).map((x: { ip: string }) => x.ip).filter(Boolean);
    if (ips.length === 0 && p.status?.podIP) ips.push(p.status.podIP);
    const ann = p.metadata.annotations ?? {};
    const containerId = ann['cni.projectcalico.org/containerID'];
    const cniIp = (ann['cni.projectcalico.org/podIP'] ?? '').split('/')[0];
    for (const ip of ips)
      out.push({
        pod: `${p.metadata.namespace}/${p.metadata.name}`,
        ip,
        handle: containerId ? `k8s-pod-network.${containerId}` : undefined,
        fromCni: ip === cniIp,
      });
  }
  return out;
}

/**
 * What is wrong with the pods' addresses against IPAM (`owners`: address -> the handles allocated to it) and the
 * pools' CIDRs. Returns one line per problem and how many addresses had to be held (so a caller can refuse a check
 * that judged nothing).
 */
export function judgePodAddresses(addrs: PodAddress[], owners: Map<string, string[]>, poolCidrs: string[]): { problems: string[]; judged: number } {
  const problems: string[] = [];
  const byIp = new Map<string, string[]>();
  for (const a of addrs) byIp.set(a.ip, [...(byIp.get(a.ip) ?? []), a.pod]);
  for (const [ip, pods] of byIp) if (pods.length > 1) problems.push(`${ip} is the address of ${pods.length} pods: ${pods.join(', ')}`);
  let judged = 0;
  for (const a of addrs) {
    if (!a.fromCni && !poolCidrs.some((c) => inCidr(a.ip, c))) continue;
    judged++;
    const held = owners.get(a.ip) ?? [];
    if (held.length === 0) problems.push(`${a.ip} of running pod ${a.pod} is free in IPAM (the next pod can get it)`);
    else if (held.length > 1) problems.push(`${a.ip} of pod ${a.pod} is allocated ${held.length} times: ${held.join(', ')}`);
    else if (a.handle && held[0] !== a.handle) problems.push(`${a.ip} of pod ${a.pod} is allocated to ${held[0]}, not to its own handle ${a.handle}`);
  }
  return { problems, judged };
}
