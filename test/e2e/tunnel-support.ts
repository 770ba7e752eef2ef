/**
 * Node tunnel addresses as calico-node allocates them (`ipam-driver tunnel`: node/pkg/allocateip's reconcile, one
 * per node), and the check that they are still consistent after the tool acted: each address allocated to its
 * `<type>-tunnel-addr-<node>` handle alone, the Node annotation naming that same address, `calicoctl ipam check`
 * counting it in use, and calico-node's next reconcile (after a restart or a pool change) keeping it. With the node
 * side running, calico-node's own allocator holds them instead: `waitNodeTunnels` reads what it wrote into the
 * Calico Nodes and `expectNodeTunnelsKept` checks each is still named and held by its node's tunnel handle.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { expect } from 'vitest';
import { CALICO_PROGRAMS_VERSION, ensureCalicoProgram } from '../../src/dev/local-cluster/calico-programs.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { until } from '../support/until.js';
import { calicoctl } from './calico-support.js';
import { kubeconfig, runCli } from './helpers.js';
import { ipamCheck, readIpam } from './ipam-support.js';

/** A node's tunnel addresses ("" = none), as the driver's `tunnel` line reports them. */
export interface TunnelAddrs {
  node: string;
  ipip: string;
  vxlan: string;
}

const TYPES = [
  { key: 'ipip', handle: 'ipip-tunnel-addr-', annotation: 'projectcalico.org/IPv4IPIPTunnelAddr' },
  { key: 'vxlan', handle: 'vxlan-tunnel-addr-', annotation: 'projectcalico.org/IPv4VXLANTunnelAddr' },
] as const;

/** Run calico-node's tunnel-address reconcile for each node (`ipam-driver tunnel`); fails on any failed node. */
export async function allocateTunnels(nodes: string[]): Promise<TunnelAddrs[]> {
  const dir = await ensureCalicoProgram('ipam-driver', CALICO_PROGRAMS_VERSION);
  const stdout = await new Promise<string>((resolve, reject) =>
    execFile(
      path.join(dir, 'ipam-driver'),
      ['tunnel', '--nodes', nodes.join(',')],
      { env: { ...process.env, KUBECONFIG: kubeconfig(), DATASTORE_TYPE: 'kubernetes' } },
      (err, out, stderr) => (err ? reject(new Error(`ipam-driver tunnel: ${err.message}\n${out}${stderr.slice(-2000)}`)) : resolve(out)),
    ),
  );
  const lines = stdout
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as TunnelAddrs & { op: string });
  expect(lines.map((l) => l.op)).toEqual(nodes.map(() => 'tunnel'));
  return lines.map(({ node, ipip, vxlan }) => ({ node, ipip, vxlan }));
}

/**
 * Every node's tunnel addresses are still `expected`: named by the Node annotation, allocated in an IPAMBlock to the
 * node's tunnel handle and to nothing else, recorded once by that IPAMHandle, counted in use (not leaked, not
 * missing) by `calicoctl ipam check`; and a reconcile as calico-node runs it on restart keeps every address.
 * With `doctor`, the live doctor reports no IPAM problem about them either.
 */
export async function expectTunnelsIntact(client: KubeClient, expected: TunnelAddrs[], opts: { doctor?: boolean } = {}): Promise<void> {
  const addrs = await expectTunnelsHeld(client, expected);
  if (opts.doctor) {
    const d = await runCli(['doctor', '-o', 'json']);
    const findings: { id: string; objects?: string[] }[] = JSON.parse(d.stdout).findings;
    const names = (o: string) => /tunnel-addr-/.test(o) || o.split(/[\s,()/]+/).some((w) => addrs.includes(w));
    const about = findings.filter((f) => f.id.startsWith('ipam-') && (f.objects ?? []).some(names));
    expect(about).toEqual([]);
  }
  expect(await allocateTunnels(expected.map((e) => e.node))).toEqual(expected);
}

/**
 * Every node's tunnel addresses are still `expected`: named by the Node, allocated to the node's tunnel handle alone,
 * recorded once by that IPAMHandle, counted in use by `calicoctl ipam check`. Returns the addresses.
 */
export async function expectTunnelsHeld(client: KubeClient, expected: TunnelAddrs[]): Promise<string[]> {
  const ipam = await readIpam(client);
  const wrong: string[] = [];
  const addrs: string[] = [];
  for (const want of expected) {
    const ann = (await client.get(K.node, undefined, want.node)).metadata.annotations ?? {};
    for (const t of TYPES) {
      const ip = want[t.key];
      const named = (ann[t.annotation] ?? '').split('/')[0];
      if (named !== ip) wrong.push(`Node ${want.node} ${t.annotation}: ${named || 'none'}, not ${ip || 'none'}`);
      const handle = t.handle + want.node;
      const held = [...ipam.owners].filter(([, o]) => o.includes(handle)).map(([a]) => a);
      if (held.join() !== ip) wrong.push(`${handle} holds ${held.join(', ') || 'nothing'}, not ${ip || 'nothing'}`);
      if (!ip) continue;
      addrs.push(ip);
      if (ipam.owners.get(ip)?.join() !== handle) wrong.push(`${ip} allocated to ${ipam.owners.get(ip)?.join(', ') ?? 'nobody'}, not ${handle}`);
      const recorded = Object.values(ipam.handles.get(handle) ?? {}).reduce((a, n) => a + n, 0);
      if (recorded !== 1) wrong.push(`IPAMHandle ${handle} records ${recorded} addresses, not 1`);
    }
  }
  expect(wrong).toEqual([]);
  const check = await ipamCheck();
  expect(check.nodeTunnelIps, check.text).toBe(addrs.length);
  expect(addrs.filter((a) => check.leakedIps.has(a))).toEqual([]);
  expect(check.noAllocation, check.text).toBe(0);
  return addrs;
}

/** The tunnel addresses each Calico Node names (`calicoctl get nodes`: spec.ipv4IPIPTunnelAddr, ipv4VXLANTunnelAddr). */
export async function calicoNodeTunnels(nodes: string[]): Promise<TunnelAddrs[]> {
  const items: any[] = JSON.parse(await calicoctl(['get', 'nodes', '-o', 'json'])).items ?? [];
  return nodes.map((node) => {
    const spec = items.find((n) => n.metadata?.name === node)?.spec ?? {};
    return { node, ipip: spec.ipv4IPIPTunnelAddr ?? '', vxlan: spec.ipv4VXLANTunnelAddr ?? '' };
  });
}

/**
 * With the node side running: waits until calico-node's start-up is done on every node and its tunnel allocator has
 * written a VXLAN address into each Calico Node, and returns the addresses.
 */
export async function waitNodeTunnels(cluster: LocalCluster, nodes: string[], timeoutMs = 300_000): Promise<TunnelAddrs[]> {
  let got: TunnelAddrs[] = [];
  await until(
    'start-up done and a VXLAN tunnel address on every Calico Node',
    async () => {
      const st = cluster.calicoStatus()?.nodeSide?.nodes ?? {};
      if (!nodes.every((n) => st[n]?.startup === 'done' && st[n]?.allocator?.pid)) return false;
      got = await calicoNodeTunnels(nodes);
      return got.every((t) => /^\d+\.\d+\.\d+\.\d+$/.test(t.vxlan));
    },
    { timeoutMs, intervalMs: 1000, state: () => `node side ${JSON.stringify(cluster.calicoStatus()?.nodeSide?.nodes)}; Calico Nodes ${JSON.stringify(got)}` },
  );
  return got;
}

/**
 * With the node side running (its allocator, not `ipam-driver tunnel`, owns the addresses): each Calico Node still
 * names the tunnel address it had (`expected`), and that address is allocated to its node's tunnel handle alone.
 */
export async function expectNodeTunnelsKept(client: KubeClient, expected: TunnelAddrs[]): Promise<void> {
  expect(await calicoNodeTunnels(expected.map((e) => e.node))).toEqual(expected);
  await expectTunnelsHeld(client, expected);
}
