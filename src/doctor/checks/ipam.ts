/**
 * IPAM consistency, read from the crd.projectcalico.org objects as Calico stores them:
 * - IPAMBlock.spec: `cidr`, `affinity` ("host:<node>"), `allocations[ordinal]` = index into `attributes` (null = free),
 *   `attributes[i]` = { handle_id, secondary: { namespace, pod, node, type } }.
 * - IPAMHandle.spec: `handleID` ("k8s-pod-network.<containerID>" for pods, "<kind>-tunnel-addr-<node>" for tunnels),
 *   `block`: { <block cidr>: <count> }.
 * - BlockAffinity.spec: `node`, `cidr`, `state`, `deleted` (a string).
 */
import {
  IPAM_HOST_AFFINITY_PREFIX,
  IPAM_RELEASE_RECIPE,
  IPAM_TUNNEL_HANDLE,
  IPAM_WINDOWS_RESERVED_HANDLE,
  POD_ANNOTATION_POD_IP,
  POD_ANNOTATION_POD_IPS,
} from '../../calico/knowledge.js';
import type { KubeObject } from '../../kube/types.js';
import { addressAt, canonicalIp, cidrContains, parseCidr, parseIp, type Cidr } from '../ip.js';
import { KEYS, objectsOf, podRef, ref, type CalicoState, type NodeInfo, type PodInfo } from '../state.js';
import type { Check, Finding } from '../types.js';

export interface Allocation {
  ip: string;
  block: KubeObject;
  handleId?: string;
  namespace?: string;
  pod?: string;
  node?: string;
}

/** Every allocated address in every block, with the handle and owner its attributes name. */
export function allocations(state: CalicoState): Allocation[] {
  const out: Allocation[] = [];
  for (const block of objectsOf(state, KEYS.ipamBlocks)) {
    const cidr = parseCidr(block.spec?.cidr);
    if (!cidr) continue;
    const attrs: any[] = block.spec?.attributes ?? [];
    (block.spec?.allocations ?? []).forEach((a: number | null, ordinal: number) => {
      if (a === null || a === undefined) return;
      const at = attrs[a] ?? {};
      out.push({
        ip: addressAt(cidr, ordinal),
        block,
        handleId: at.handle_id,
        namespace: at.secondary?.namespace,
        pod: at.secondary?.pod,
        node: at.secondary?.node,
      });
    });
  }
  return out;
}

/** Pods that hold a Calico-managed address now: scheduled, not finished, not on the host network, with an IP. */
export function networkedPods(state: CalicoState | PodInfo[]): PodInfo[] {
  return (Array.isArray(state) ? state : (state.pods ?? [])).filter(
    (p) => !p.hostNetwork && p.podIPs.length > 0 && p.phase !== 'Succeeded' && p.phase !== 'Failed',
  );
}

const ipamPresent = (state: CalicoState) => state.objects[KEYS.ipPools] !== undefined;

const orphanAffinities: Check = {
  name: 'IPAM blocks affine to missing nodes',
  run(state) {
    if (!ipamPresent(state) || !state.nodes) return [];
    const nodes = new Set(state.nodes.map((n) => n.name));
    const byNode = new Map<string, string[]>();
    const add = (node: string, obj: string) => (byNode.get(node) ?? byNode.set(node, []).get(node)!).push(obj);
    for (const b of objectsOf(state, KEYS.ipamBlocks)) {
      const aff: string | undefined = b.spec?.affinity;
      if (aff?.startsWith(IPAM_HOST_AFFINITY_PREFIX)) {
        const node = aff.slice(IPAM_HOST_AFFINITY_PREFIX.length);
        if (!nodes.has(node)) add(node, ref(b));
      }
    }
    for (const a of objectsOf(state, KEYS.blockAffinities)) {
      const node: string | undefined = a.spec?.node;
      // 3.30+ LoadBalancer IPAM affinities (type virtual, node load-balancer) belong to no Kubernetes node.
      const virtual = a.spec?.type !== undefined && a.spec.type !== 'host';
      if (node && !virtual && a.spec?.deleted !== 'true' && !nodes.has(node)) add(node, ref(a));
    }
    for (const h of objectsOf(state, KEYS.ipamHandles)) {
      const node = IPAM_TUNNEL_HANDLE.exec(h.spec?.handleID ?? '')?.[1];
      if (node && !nodes.has(node)) add(node, ref(h));
    }
    return [...byNode].map(([node, objects]) => ({
      id: 'ipam-block-affinity-missing-node',
      severity: 'warning' as const,
      title: `IPAM blocks, affinities or tunnel addresses belong to node ${node}, which no longer exists`,
      objects,
      why:
        `Calico gives each node blocks of addresses (affinity host:${node}). The node is gone but its blocks are still ` +
        `claimed, so their addresses cannot go to other nodes; normally calico-kube-controllers releases them when a node is ` +
        `deleted, so this also means kube-controllers is not running or not keeping up.`,
      fix:
        `Make sure calico-kube-controllers is running (it garbage-collects a deleted node's IPAM). Otherwise release them by hand, ` +
        `in this order (ipam release refuses a report taken without the lock; every CNI ADD/DEL fails until the unlock):\n${RELEASE_FIX}`,
    }));
  },
};

/**
 * The addresses that are in use, as `calicoctl ipam check` (3.28 check.go) counts them: every workload endpoint's
 * addresses (a running pod's IPs; libcalico-go reads status.podIPs, else the cni.projectcalico.org podIPs/podIP
 * annotations) and every node's tunnel addresses.
 */
export function inUseAddresses(pods: PodInfo[], nodes: NodeInfo[]): Map<string, string> {
  const owner = new Map<string, string>();
  for (const p of networkedPods(pods)) for (const ip of p.podIPs) owner.set(canonicalIp(ip) ?? ip, podRef(p));
  for (const p of pods.filter((x) => !x.hostNetwork && x.podIPs.length === 0 && x.phase !== 'Succeeded' && x.phase !== 'Failed')) {
    const ann = p.calicoAnnotations[POD_ANNOTATION_POD_IPS] ?? p.calicoAnnotations[POD_ANNOTATION_POD_IP] ?? '';
    for (const ip of ann.split(',').filter(Boolean)) owner.set(canonicalIp(ip.split('/')[0]!) ?? ip, podRef(p));
  }
  for (const n of nodes) for (const ip of n.tunnelIPs ?? []) owner.set(canonicalIp(ip) ?? ip, `Node/${n.name}`);
  return owner;
}

/**
 * Whether `block` allocates any of `addresses` (canonical, as inUseAddresses keys them). pod-ip-not-allocated reads
 * no other block: an address is allocated only in the block whose CIDR holds it, so a caller with many blocks may
 * keep just these (restore's read-back, which would otherwise hold every block of 100k handles at once).
 */
export function allocatesAnyOf(block: KubeObject, addresses: ReadonlySet<string>): boolean {
  const cidr = parseCidr(block.spec?.cidr);
  const allocs: (number | null)[] = block.spec?.allocations ?? [];
  if (!cidr || !addresses.size) return false;
  for (let ordinal = 0; ordinal < allocs.length; ordinal++) {
    if (allocs[ordinal] !== null && allocs[ordinal] !== undefined && addresses.has(addressAt(cidr, ordinal))) return true;
  }
  return false;
}

/** Tunnel handles of nodes that are gone: ipam-block-affinity-missing-node reports them (one finding per cause). */
const goneNodeTunnel = (handleId: string | undefined, nodes: Set<string>) => {
  const node = IPAM_TUNNEL_HANDLE.exec(handleId ?? '')?.[1];
  return node !== undefined && !nodes.has(node);
};

const RELEASE_FIX = IPAM_RELEASE_RECIPE.map((l) => `  ${l}`).join('\n');

/**
 * calicoctl ipam check's own problems (3.28 check.go), with its definitions: an allocation is leaked when its
 * address is in use by no workload endpoint and no node tunnel (judged by IP, not by the pod its attributes name);
 * a handle is leaked when no block allocates to it; a handle is missing when a block allocates to a handle that has
 * no IPAMHandle object (calicoctl lists these without counting them as problems).
 */
const ipamCheckProblems: Check = {
  name: 'IPAM allocations and handles, as calicoctl ipam check judges them',
  run(state) {
    if (!ipamPresent(state) || !state.pods || !state.nodes) return [];
    const inUse = inUseAddresses(state.pods, state.nodes);
    const nodes = new Set(state.nodes.map((n) => n.name));
    const handles = new Map(objectsOf(state, KEYS.ipamHandles).map((h) => [h.spec?.handleID as string, h]));
    const leakedByHandle = new Map<string, Allocation[]>();
    const referenced = new Set<string>();
    const missing = new Map<string, Allocation[]>();
    for (const a of allocations(state)) {
      if (a.handleId) referenced.add(a.handleId);
      if (a.handleId && !handles.has(a.handleId)) (missing.get(a.handleId) ?? missing.set(a.handleId, []).get(a.handleId)!).push(a);
      if (a.handleId === IPAM_WINDOWS_RESERVED_HANDLE || inUse.has(a.ip) || goneNodeTunnel(a.handleId, nodes)) continue;
      const key = a.handleId ?? '';
      (leakedByHandle.get(key) ?? leakedByHandle.set(key, []).get(key)!).push(a);
    }
    const leaked: string[] = [];
    for (const [id, allocs] of leakedByHandle) {
      const h = handles.get(id);
      const who = allocs[0]!.pod ? ` (pod ${allocs[0]!.namespace}/${allocs[0]!.pod})` : '';
      if (h) leaked.push(`${ref(h)}${who} holds ${allocs.map((a) => a.ip).join(', ')}`);
      else for (const a of allocs) leaked.push(`IP/${a.ip} in ${ref(a.block)}${who}${id ? `, handle ${id} missing` : ', no handle'}`);
    }
    const out: Finding[] = [];
    if (leaked.length > 0) {
      out.push({
        id: 'ipam-handle-without-pod',
        severity: 'warning',
        title: `${leaked.length} IPAM allocation(s) are in use by no pod and no node tunnel (calicoctl ipam check: "allocated in IPAM but not actually in use")`,
        objects: leaked,
        why:
          'An allocated address that no workload endpoint and no node tunnel uses is leaked: IPAM will never hand it out again, ' +
          'and a block full of leaks makes nodes borrow addresses from other blocks. Judged by address, as calicoctl ipam check does.',
        fix: `calico-kube-controllers releases leaked addresses on its own (after a grace period); if it is not running, release them (the lock first: ipam release refuses a report taken without it, and every CNI ADD/DEL fails until the unlock):\n${RELEASE_FIX}`,
      });
    }
    const unreferenced = [...handles].filter(([id]) => !referenced.has(id) && !goneNodeTunnel(id, nodes)).map(([, h]) => ref(h));
    if (unreferenced.length > 0) {
      out.push({
        id: 'ipam-handle-leaked',
        severity: 'warning',
        title: `${unreferenced.length} IPAM handle(s) hold no address (calicoctl ipam check: "handles with no matching IPs")`,
        objects: unreferenced,
        why: 'No block allocates an address to these handles any more; they are leftovers that calicoctl ipam check counts as problems.',
        fix: `Release them with calicoctl's report (the report lists them as leakedHandles):\n${RELEASE_FIX}`,
      });
    }
    if (missing.size > 0) {
      out.push({
        id: 'ipam-handle-missing',
        severity: 'info',
        title: `${missing.size} handle(s) named by IPAM blocks have no IPAMHandle object (calicoctl ipam check: "handles mentioned in blocks with no matching handle resource")`,
        objects: [...missing].map(
          ([id, allocs]) => `IPAMHandle/${id} (in ${[...new Set(allocs.map((a) => ref(a.block)))].join(', ')}: ${allocs.map((a) => a.ip).join(', ')})`,
        ),
        why: 'calicoctl ipam check lists these without counting them as problems. Addresses under them that nothing uses are also reported as leaked (ipam-handle-without-pod).',
        fix: 'Nothing to do for addresses in use; leaked ones are freed with the release recipe of ipam-handle-without-pod.',
      });
    }
    return out;
  },
};

const duplicateAddresses: Check = {
  name: 'addresses allocated twice',
  run(state) {
    if (!ipamPresent(state)) return [];
    const out: Finding[] = [];
    const byIp = new Map<string, Allocation[]>();
    for (const a of allocations(state)) (byIp.get(a.ip) ?? byIp.set(a.ip, []).get(a.ip)!).push(a);
    for (const [ip, allocs] of byIp) {
      if (allocs.length < 2) continue;
      out.push({
        id: 'ipam-duplicate-address',
        severity: 'error',
        title: `Address ${ip} is allocated in ${allocs.length} IPAM blocks`,
        objects: [`IP/${ip}`, ...allocs.map((a) => `${ref(a.block)}${a.pod ? ` (pod ${a.namespace}/${a.pod})` : ''}`)],
        why: 'Overlapping IPAM blocks let two workloads receive the same address; traffic for it reaches only one of them. This happens when IPAM objects from different times are mixed (a partial restore, re-created pools).',
        fix: "Find the block that does not match its pool's blockSize or was restored from an older state, move its workloads (delete their pods), then delete the stale IPAMBlock and BlockAffinity objects. `calicoctl ipam check` reports the same problem.",
      });
    }
    const podsByIp = new Map<string, PodInfo[]>();
    for (const p of networkedPods(state))
      for (const ip of p.podIPs) {
        const c = canonicalIp(ip) ?? ip;
        (podsByIp.get(c) ?? podsByIp.set(c, []).get(c)!).push(p);
      }
    for (const [ip, pods] of podsByIp) {
      if (pods.length < 2) continue;
      out.push({
        id: 'pod-duplicate-ip',
        severity: 'error',
        title: `${pods.length} running pods share the address ${ip}`,
        objects: [`IP/${ip}`, ...pods.map(podRef)],
        why: 'Two pods with the same IP: connections to it reach only one of them. This is what a lost IPAM state causes (for example after the Calico CRDs were deleted and re-created): IPAM hands out addresses running pods still hold.',
        fix: 'Delete the newer pod(s) so they get a fresh address (kubectl delete pod -n <ns> <name>), then run `cni-rewind doctor` again; if IPAM objects were lost, restore them from a backup first: cni-rewind restore <bundle> --resources.',
      });
    }
    return out;
  },
};

/**
 * Pod addresses against pools and IPAM. "Not allocated" uses calicoctl ipam check's definition (3.28 check.go): every
 * address in use (a pod's IPs, from status or the Calico annotations, and every node tunnel address) that lies in a
 * pool but has no IPAM allocation. calicoctl splits off addresses in no *active* (enabled) pool; here an unallocated
 * address in a disabled pool stays an error, named with its pool: re-enabling that pool (Calico issue #9100 does it
 * unasked) hands the address out again.
 */
export const podAddressesVsPools: Check = {
  name: 'pod addresses vs pools and IPAM',
  run(state) {
    if (!ipamPresent(state) || !state.pods) return [];
    const pools = objectsOf(state, KEYS.ipPools)
      .map((p) => ({ pool: p, cidr: parseCidr(p.spec?.cidr) }))
      .filter((x): x is { pool: KubeObject; cidr: Cidr } => !!x.cidr);
    const poolOf = (text: string) => {
      const ip = parseIp(text);
      return ip ? pools.find((x) => cidrContains(x.cidr, ip)) : undefined;
    };
    const allocated = new Set(allocations(state).map((a) => a.ip));
    const outside: string[] = [];
    const disabled = new Map<string, string[]>();
    for (const p of networkedPods(state)) {
      for (const text of p.podIPs) {
        if (!parseIp(text)) continue;
        const inPool = poolOf(text);
        if (!inPool) outside.push(`${podRef(p)} (${text})`);
        else if (inPool.pool.spec?.disabled === true)
          (disabled.get(inPool.pool.metadata.name) ?? disabled.set(inPool.pool.metadata.name, []).get(inPool.pool.metadata.name)!).push(
            `${podRef(p)} (${text})`,
          );
      }
    }
    const untracked: string[] = [];
    for (const [ip, owner] of inUseAddresses(state.pods, state.nodes ?? [])) {
      const inPool = poolOf(ip);
      if (!inPool || allocated.has(ip)) continue;
      untracked.push(`${owner} (${ip}${inPool.pool.spec?.disabled === true ? `, disabled pool ${inPool.pool.metadata.name}` : ''})`);
    }
    untracked.sort();
    const out: Finding[] = [];
    if (untracked.length > 0) {
      out.push({
        id: 'pod-ip-not-allocated',
        severity: 'error',
        title: `${untracked.length} address(es) in use by pods or node tunnels lie in an IP pool but IPAM has no allocation for them (calicoctl ipam check: "in use ... but have no corresponding IPAM allocation")`,
        objects: untracked,
        why: 'IPAM does not know these addresses are in use, so it will give them to new pods: duplicate IPs. This is the state the Calico IPAM objects are in after the CRDs were deleted and re-created (the destructive downgrade).',
        fix: 'Restore the IPAM objects (IPAMBlock, IPAMHandle, BlockAffinity) from a backup taken before the loss: cni-rewind restore <bundle> --resources. Without a backup, recreate the affected pods (kubectl rollout restart) so every address goes through IPAM.',
      });
    }
    if (outside.length > 0) {
      out.push({
        id: 'pod-ip-outside-pools',
        severity: 'warning',
        title: `${outside.length} pod address(es) lie in no Calico IP pool`,
        objects: outside,
        why: 'These pods got their address from a pool that no longer exists (deleted or re-created with another CIDR) or from another IPAM. Calico routes and policies for them may be missing, and their addresses can collide with a future pool.',
        fix: 'Re-create the pool they came from (cni-rewind restore <bundle> --resources --kinds IPPool) or recreate the pods so they get addresses from a current pool (kubectl rollout restart).',
      });
    }
    for (const [pool, pods] of disabled) {
      out.push({
        id: 'pod-ip-in-disabled-pool',
        severity: 'warning',
        title: `${pods.length} pod(s) still use addresses from disabled IP pool ${pool}`,
        objects: [`IPPool/${pool}`, ...pods],
        why: 'A disabled pool hands out no new addresses but keeps the ones in use. While pods remain in it, the pool cannot be deleted without cutting them off; a migration to another pool is unfinished.',
        fix: 'Recreate these pods (kubectl rollout restart deployment/<name> -n <ns>, or delete the pods) so they get addresses from an enabled pool; then the pool can be deleted.',
      });
    }
    return out;
  },
};

export const ipamChecks: Check[] = [orphanAffinities, ipamCheckProblems, duplicateAddresses, podAddressesVsPools];
