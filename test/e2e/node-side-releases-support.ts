/**
 * The node side of a release from its own tree, installed as `npm run cluster -- up --calico V` installs it (the
 * built cluster CLI, run as a user would, on the calling file's slot cluster), under the release's own operator. For
 * each: calico-node's start-up done and its tunnel allocator running on both nodes, built from that release's tree
 * (the running allocator's binary says which), a VXLAN tunnel address per node (each release's
 * custom-resources.yaml asks for VXLANCrossSubnet on 192.168.0.0/16) held in IPAM as that node's, `cluster status`
 * listing them; a pod's CNI ADD gives it an address in the pool, written into its status and held in IPAM for it; DEL
 * frees it; `calicoctl ipam check` clean; stopping the supervisor leaves no namespace. Last, `npm run cluster -- down`
 * with a pod ADDed stops every node-side process and removes every namespace the cluster made.
 */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/core/package-root.js';
import { calicoProgramsFor, ensureCalicoProgram } from '../../src/dev/local-cluster/calico-programs.js';
import { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { listNetns, netnsPrefix } from '../../src/dev/local-cluster/netns.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject } from '../../src/kube/types.js';
import { calicoctl, clearCalicoFinalizers } from './calico-support.js';
import { parseIpamCheck } from './ipam-support.js';
import { expectPodAddressesHeld } from './pod-ip-support.js';
import { calicoType, deleteNodes, kubeconfig, resetCalico, testClient } from './helpers.js';

const run = promisify(execFile);
const CLI = path.join(packageRoot(), 'dist', 'src', 'dev', 'local-cluster', 'cli.js');
/** The nodes `up --calico` makes (calico-install.ts LOCAL_CALICO_NODES). */
const NODES = ['local-node-1', 'local-node-2'];
const inPool = (ip: string | undefined) => !!ip && /^192\.168\.\d+\.\d+$/.test(ip);

/** A release, the operator its tigera-operator.yaml runs, the tree its node side must run from (the build pins). */
export interface ReleaseUnderTest {
  version: string;
  operator: string;
  nodeTree: string;
}

const cluster = new LocalCluster({ name: process.env.CNI_REWIND_CLUSTER_NAME ?? 'e2e' });
let client: KubeClient;

async function cli(args: string[]): Promise<{ stdout: string; stderr: string }> {
  const started = Date.now();
  const out = await run(process.execPath, [CLI, ...args], { timeout: 1_800_000, maxBuffer: 64 * 1024 * 1024 });
  console.log(`cluster ${args.join(' ')}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return out;
}

/** Logs the seconds since the previous mark of the same test (where a version's minutes go). */
function stopwatch(label: string): (step: string) => void {
  let last = Date.now();
  return (step) => {
    console.log(`${label} ${step}: ${((Date.now() - last) / 1000).toFixed(1)} s`);
    last = Date.now();
  };
}

async function cleanUp(): Promise<void> {
  await cluster.stopCalico();
  await clearCalicoFinalizers(client);
  await resetCalico(client);
  for (const p of await client.listAll<KubeObject>(K.pod, { namespace: 'default' })) await client.delete(K.pod, 'default', p.metadata.name!);
  await deleteNodes(client, 'local-node-');
}

/**
 * Every process of this cluster's node side, found in /proc: its supervisor, calico-node-lite (start-up, tunnel
 * allocator) with this cluster's kubeconfig, and the API bridges run in its node namespaces (`ip netns exec` execs
 * them, so their command line names the cluster's bridge socket, not the namespace).
 */
function nodeSideProcesses(workDir: string): { pid: number; cmd: string }[] {
  const ours = `KUBECONFIG=${kubeconfig()}`;
  const found: { pid: number; cmd: string }[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').join(' ');
      const env = readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0');
      const supervisor = /calico-supervisor\.js|api-bridge\.js/.test(cmd) && cmd.includes(workDir);
      if (supervisor || (cmd.includes('calico-node-lite') && env.includes(ours))) found.push({ pid: Number(entry), cmd });
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

const podSpec = (name: string) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: 'default' },
  spec: { nodeName: NODES[0], containers: [{ name: 'web', image: 'nginx' }] },
});

/**
 * The pod's address once the CNI plugin gave it one in the pool, written into its status, and the namespace the
 * supervisor's status lists for it (the status file is written after the pod's, so both are waited for).
 */
const waitPodIp = (name: string) =>
  client.waitFor(
    `${name} to get its address from the CNI plugin`,
    async () => {
      const pod = await client.getOrUndefined<KubeObject>(K.pod, 'default', name);
      const ip: string | undefined = pod?.status?.podIP;
      const rec = cluster.calicoStatus()?.nodeSide?.pods[`default/${name}`];
      return rec && inPool(ip) && rec.ip === ip ? { ip: ip!, netns: rec.netns } : undefined;
    },
    { timeoutMs: 180_000, intervalMs: 500, state: async () => JSON.stringify(cluster.calicoStatus()?.nodeSide?.pods ?? 'no node side') },
  );

/**
 * The tests of one file: each release in turn on the file's slot cluster, then `cluster down` on the last one's
 * install. Files run their own releases in parallel (node-side-releases.test.ts, node-side-releases-new.test.ts).
 */
export function describeReleases(RELEASES: readonly ReleaseUnderTest[]): void {
  describe('the node side from each release tree, as `npm run cluster -- up --calico V` runs it', () => {
    beforeAll(async () => {
      for (const r of RELEASES) {
        await ensureCalicoProgram('operator', r.operator);
        await ensureCalicoProgram('calico', calicoProgramsFor(r.version)!);
        await ensureCalicoProgram('node-side', r.nodeTree);
      }
      client = await testClient();
      await cleanUp();
    }, 60 * 60_000);
    afterAll(async () => {
      if (client && (await cluster.isUp())) await cleanUp();
      client?.close();
    }, 600_000);

    for (const [i, r] of RELEASES.entries()) {
      const last = i === RELEASES.length - 1;
      it(`${r.version}: start-up, tunnel allocator and CNI ADD/DEL from the ${r.nodeTree} tree`, async () => {
        const tree = calicoProgramsFor(r.version)!;
        const mark = stopwatch(r.version);
        const up = await cli(['up', '--calico', r.version]);
        mark('up --calico');
        expect(up.stdout).toContain(`export KUBECONFIG=${kubeconfig()}`);

        // `up` returned ready: start-up done and the allocator running on both nodes, from the release's own tree.
        const nodes = cluster.calicoStatus()?.nodeSide?.nodes ?? {};
        for (const n of NODES) {
          expect(nodes[n], JSON.stringify(nodes)).toMatchObject({ startup: 'done', calico: r.nodeTree });
          expect(readlinkSync(`/proc/${nodes[n]!.allocator!.pid}/exe`)).toContain(`/node-side-${r.nodeTree}_`);
        }
        // Start-up writes its own version into ClusterInformation (the release tree's startup.VERSION).
        const info = await client.get(calicoType('clusterinformations', 'ClusterInformation'), undefined, 'default');
        expect(info.spec?.calicoVersion).toBe(r.nodeTree);
        const status = await cli(['status']);
        const listed = JSON.parse(/^node side: (.*)$/m.exec(status.stdout)?.[1] ?? '{}');
        for (const n of NODES) expect(listed.nodes?.[n], status.stdout).toMatchObject({ startup: 'done', calico: r.nodeTree });

        // Each node's VXLAN tunnel address, claimed by its allocator and held in IPAM as that node's.
        const tunnels = await client.waitFor(
          'a VXLAN tunnel address on both Calico Nodes',
          async () => {
            const list = JSON.parse(await calicoctl(['get', 'nodes', '-o', 'json'], undefined, tree));
            const byName = new Map<string, any>((list.items ?? []).map((n: any) => [n.metadata.name, n]));
            const addrs = NODES.map((n) => byName.get(n)?.spec?.ipv4VXLANTunnelAddr as string | undefined);
            return addrs.every(inPool) ? (addrs as string[]) : undefined;
          },
          { timeoutMs: 180_000, intervalMs: 1000 },
        );
        for (const [j, ip] of tunnels.entries()) {
          const show = await calicoctl(['ipam', 'show', `--ip=${ip}`], undefined, tree);
          expect(show).toMatch(/is in use/);
          expect(show).toContain(`node: ${NODES[j]}`);
          expect(show).toContain('type: vxlanTunnelAddress');
        }

        mark('status and tunnel addresses');
        // A pod on a node: the CNI plugin's ADD gives it a pool address, in its status and held in IPAM for it.
        const name = `nsr-${r.version.replaceAll('.', '')}`;
        await client.create(K.pod, podSpec(name));
        const { ip: podIp, netns: podNetns } = await waitPodIp(name);
        const pod = await client.get<KubeObject>(K.pod, 'default', name);
        expect(pod.metadata.annotations?.['cni.projectcalico.org/podIP']).toBe(`${podIp}/32`);
        const held = await calicoctl(['ipam', 'show', `--ip=${podIp}`], undefined, tree);
        expect(held).toMatch(/is in use/);
        expect(held).toContain(`pod: ${name}`);
        expect(listNetns(netnsPrefix(cluster.name))).toContain(podNetns);
        // A second pod that stays, so the check after the DEL judges a pod of its own, not only the operator's.
        await client.create(K.pod, podSpec(`${name}-kept`));
        const { ip: keptIp } = await waitPodIp(`${name}-kept`);
        // No two pods share an address, each running pod's held by its own handle: these pods' and the operator's.
        expect((await expectPodAddressesHeld(client, 2)).map((a) => a.ip)).toEqual(expect.arrayContaining([podIp, keptIp]));

        mark('ADD');
        // Deleting the pod runs DEL: the address is free again and its namespace gone.
        await client.delete(K.pod, 'default', name);
        await client.waitFor(
          'DEL to free the address and remove the namespace',
          async () => {
            const show = await calicoctl(['ipam', 'show', `--ip=${podIp}`], undefined, tree);
            return !/is in use/.test(show) && !listNetns(netnsPrefix(cluster.name)).includes(podNetns) ? true : undefined;
          },
          { timeoutMs: 120_000, intervalMs: 1000 },
        );
        const check = parseIpamCheck(await calicoctl(['ipam', 'check', '--show-problem-ips'], undefined, tree));
        expect(check.problems, check.text).toBe(0);
        expect(check.nodeTunnelIps, check.text).toBe(NODES.length);
        // After the DEL: the kept pod and the operator's still hold their addresses, and none has the freed one.
        const after = (await expectPodAddressesHeld(client, 1)).map((a) => a.ip);
        expect(after).toContain(keptIp);
        expect(after).not.toContain(podIp);
        await client.delete(K.pod, 'default', `${name}-kept`);
        await client.waitFor(
          'DEL of the kept pod',
          async () => (/is in use/.test(await calicoctl(['ipam', 'show', `--ip=${keptIp}`], undefined, tree)) ? undefined : true),
          {
            timeoutMs: 120_000,
            intervalMs: 1000,
          },
        );
        mark('DEL and ipam check');

        if (last) return; // the next test takes this install down with the CLI
        await cluster.stopCalico();
        expect(listNetns(netnsPrefix(cluster.name))).toEqual([]);
        expect(nodeSideProcesses(cluster.readState()!.workDir)).toEqual([]);
        await cleanUp();
        mark('stop and reset');
      }, 1_900_000);
    }

    it('`npm run cluster -- down` with a pod ADDed stops every node-side process and removes every namespace', async () => {
      // On the install the previous test left running (fail at once, not after a timeout, when it did not start).
      const running = cluster.calicoStatus()?.nodeSide?.nodes ?? {};
      for (const n of NODES) expect(running[n]?.startup, `the node side of ${RELEASES.at(-1)!.version} on ${n}`).toBe('done');
      await client.create(K.pod, podSpec('nsr-kept'));
      const { ip: keptIp, netns: podNetns } = await waitPodIp('nsr-kept');
      expect((await expectPodAddressesHeld(client, 1)).map((a) => a.ip)).toContain(keptIp);
      const side = cluster.calicoStatus()?.nodeSide;
      const prefix = netnsPrefix(cluster.name);
      // Before: a namespace per node the plugin ran in and the pod's, allocators and API bridges running.
      expect(listNetns(prefix)).toContain(podNetns);
      expect(listNetns(prefix).length).toBeGreaterThanOrEqual(2);
      const workDir = cluster.readState()!.workDir;
      const before = nodeSideProcesses(workDir);
      for (const n of NODES) expect(before.map((p) => p.pid)).toContain(side!.nodes[n]!.allocator!.pid);
      expect(before.some((p) => p.cmd.includes('api-bridge'))).toBe(true);

      const down = await cli(['down']);
      expect(down.stdout).toContain(`cluster "${cluster.name}" stopped`);
      expect(listNetns(prefix)).toEqual([]);
      expect(nodeSideProcesses(workDir)).toEqual([]);
      expect(await cluster.isUp()).toBe(false);
    }, 300_000);
  });
}
