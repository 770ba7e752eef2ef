/**
 * Issue 29's first scenario, with the real Calico 3.28.1 programs and libcalico-go's IPAM (control-plane/ipam-driver):
 * pods hold addresses, `backup`, then every IPAM object is lost (as when the IPAM CRDs are deleted) and calico-node's
 * tunnel allocator runs again: libcalico-go seeds a node's first block from a hash of its hostname, so each node
 * re-claims the *same* block CIDR, holding only its tunnel address. Restore used to keep those blocks "as the cluster
 * has them" and exit 0 with every pod allocation lost (the next pods get the running pods' addresses). Now each
 * bundle allocation a running pod uses goes back into the re-claimed block address by address, with its handle (the
 * driver's allocations get their Pod objects for it: podsForDriverAllocations).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import { CALICO_PROGRAMS_VERSION, ensureCalicoProgram } from '../../src/dev/local-cluster/calico-programs.js';
import { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { calicoType, kubeconfig, runCli } from './helpers.js';
import { DRIVER_NS, podsForDriverAllocations } from './driver-pods.js';
import { expectPodAddressesHeld, podAddressProblems } from './pod-ip-support.js';
import { podsUsingAddresses } from './population-pods.js';
import { IPAM_BLOCK, IPAM_HANDLE, heldByLog, ipamCheck, readEvents, readIpam, startChurn, freshInstall328, teardownInstall } from './ipam-support.js';
import { allocateTunnels, expectTunnelsIntact, type TunnelAddrs } from './tunnel-support.js';

const NODES = ['reclaim-node-1', 'reclaim-node-2', 'reclaim-node-3'];
const AFFINITY = calicoType('blockaffinities', 'BlockAffinity');
const cluster = new LocalCluster({ name: process.env.CNI_REWIND_CLUSTER_NAME ?? 'e2e' });
const dir = mkdtempSync(path.join(os.tmpdir(), 'ipam-reclaim-'));
const log = path.join(dir, 'driver.jsonl');
const bundle = path.join(dir, 'bundle');
const run = Date.now().toString(36);
let client: KubeClient;
let tunnels: TunnelAddrs[];

describe('restore --resources after the IPAM objects were lost and the nodes re-claimed the same blocks (issue 29)', () => {
  beforeAll(async () => {
    client = await freshInstall328(cluster, NODES);
    tunnels = await allocateTunnels(NODES);
  }, 60 * 60_000);

  afterAll(async () => {
    await client?.delete(K.namespace, undefined, DRIVER_NS).catch(() => undefined);
    await teardownInstall(cluster, client, 'reclaim-node-');
    rmSync(dir, { recursive: true, force: true });
  }, 600_000);

  it('every pod allocation of the bundle is held by its handle again; nothing is held twice; exit 0', async () => {
    // Pods on the three nodes through libcalico-go's IPAM, as the CNI plugin allocates them.
    const churn = await startChurn(log, { nodes: NODES, prefix: `${run}p`, rate: 30, target: 40, durationS: 6 });
    expect(await churn.done).toBe(0);
    const held = heldByLog(readEvents(log));
    expect(held.size).toBeGreaterThanOrEqual(8);
    // Their Pod objects, running with those addresses: restore puts back only allocations a running pod uses.
    await podsForDriverAllocations(client, readEvents(log), DRIVER_NS);
    const b = await runCli(['backup', '--allow-unprotected-nodes', '--out', bundle, '-o', 'json']);
    expect(b.code, b.stderr).toBe(0);
    const blocksBefore = (await client.listAll(IPAM_BLOCK)).map((x) => x.spec.cidr).sort();

    // Every IPAM object lost, then calico-node's tunnel allocator runs again on each node.
    for (const t of [AFFINITY, IPAM_HANDLE, IPAM_BLOCK]) for (const o of await client.listAll(t)) await client.delete(t, undefined, o.metadata.name);
    const again = await allocateTunnels(NODES);
    const reclaimed = (await client.listAll(IPAM_BLOCK)).map((x) => x.spec.cidr).sort();
    // The premise: the nodes claimed the blocks they had (hostname-seeded), now holding their tunnel addresses only.
    expect(reclaimed.every((c) => blocksBefore.includes(c))).toBe(true);
    const podsNow = [...(await readIpam(client)).owners.values()].flat().filter((h) => h.startsWith('k8s-pod-network.'));
    expect(podsNow).toEqual([]);

    const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json']);
    const result = JSON.parse(r.stdout);
    console.log(
      `reclaim: ${held.size} pod allocations in the bundle, ${blocksBefore.length} blocks (${reclaimed.length} re-claimed); tunnels ${JSON.stringify(tunnels)} then ${JSON.stringify(again)}; restore exit ${r.code}, counts ${JSON.stringify(result.counts)}, ipamProblems ${JSON.stringify(result.ipamProblems ?? [])}, drifted ${JSON.stringify(result.drifted)}`,
    );
    const ipam = await readIpam(client);
    const lost = [...held]
      .filter(([handle, ip]) => (ipam.owners.get(ip) ?? []).join() !== handle)
      .map(([h, ip]) => `${ip} of ${h}: ${ipam.owners.get(ip)?.join() ?? 'free'}`);
    expect(lost).toEqual([]);
    for (const [handle] of held)
      expect(
        Object.values(ipam.handles.get(handle) ?? {}).reduce((a, n) => a + n, 0),
        `IPAMHandle ${handle}`,
      ).toBe(1);
    expect([...ipam.owners].filter(([, o]) => o.length > 1)).toEqual([]);
    expect(r.code, r.stderr + r.stdout.slice(0, 4000)).toBe(0);
    await expectTunnelsIntact(client, again);
    const check = await ipamCheck();
    expect({ noAllocation: check.noAllocation, handlesWithoutIps: check.handlesWithoutIps, missingHandles: check.missingHandles }, check.text).toEqual({
      noAllocation: 0,
      handlesWithoutIps: 0,
      missingHandles: 0,
    });
    // Judged from the Pod objects: each of the driver's pods holds its address by its own handle, none shares one.
    await expectPodAddressesHeld(client, held.size);
  }, 900_000);

  it('an address a new pod took before the restore is a duplicate IP: named with the pod to restart, the rest put back, exit 3', async () => {
    const held = heldByLog(readEvents(log));
    for (const t of [AFFINITY, IPAM_HANDLE, IPAM_BLOCK]) for (const o of await client.listAll(t)) await client.delete(t, undefined, o.metadata.name);
    const again = await allocateTunnels(NODES);
    // A pod started on node 1 before the restore: IPAM gives it the lowest free address of the re-claimed block,
    // one a running pod of the bundle still uses.
    const dir = await ensureCalicoProgram('ipam-driver', CALICO_PROGRAMS_VERSION);
    const line = await new Promise<string>((resolve, reject) =>
      execFile(
        path.join(dir, 'ipam-driver'),
        ['assign', '--node', NODES[0]!, '--pod', `${run}-newcomer`],
        { env: { ...process.env, KUBECONFIG: kubeconfig(), DATASTORE_TYPE: 'kubernetes' } },
        (err, out, stderr) => (err ? reject(new Error(`${err.message}\n${out}${stderr}`)) : resolve(out)),
      ),
    );
    const newcomer = JSON.parse(line) as { ip: string; handle: string };
    const victim = [...held].find(([, ip]) => ip === newcomer.ip);
    expect(victim, `${newcomer.ip} was a bundle pod's address`).toBeDefined();
    // The newcomer runs as the CNI plugin leaves a pod: two running pods now have the one address.
    await podsUsingAddresses(client, [{ namespace: DRIVER_NS, name: `${run}-newcomer`, node: NODES[0]!, handle: newcomer.handle, ip: newcomer.ip }]);
    // The bundle's pod still runs (its Pod object, made in the first test): a duplicate matters, and restore reports
    // it, only while the bundle's pod exists (one that is gone released its address).
    const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json']);
    const result = JSON.parse(r.stdout);
    expect(r.code, r.stderr).toBe(3);
    expect(result.ipamProblems).toEqual([
      expect.stringMatching(
        new RegExp(`duplicate IP ${newcomer.ip.replace(/\./g, '\\.')}: the bundle allocates it to handle ${victim![0]}.*now to handle ${newcomer.handle}`),
      ),
    ]);
    const ipam = await readIpam(client);
    expect(ipam.owners.get(newcomer.ip)).toEqual([newcomer.handle]);
    const lost = [...held].filter(([h, ip]) => h !== victim![0] && (ipam.owners.get(ip) ?? []).join() !== h);
    expect(lost).toEqual([]);
    expect([...ipam.owners].filter(([, o]) => o.length > 1)).toEqual([]);
    await expectTunnelsIntact(client, again);
    // The pod check sees the same harm restore reported: the bundle's pod and the newcomer share the address.
    expect((await podAddressProblems(client)).problems).toEqual(expect.arrayContaining([expect.stringContaining(`${newcomer.ip} is the address of 2 pods`)]));
    // Restore's advice followed (the bundle's pod restarted; no CNI plugin runs here to give it a new address, so it
    // is deleted): every running pod, the newcomer among them, holds its address by its own handle.
    const victimPod = readEvents(log).find((e) => e.op === 'assign' && e.handle === victim![0])!.pod!;
    expect(result.ipamProblems[0]).toContain(`restart pod ${DRIVER_NS}/${victimPod}`);
    await client.delete(K.pod, DRIVER_NS, victimPod, { gracePeriodSeconds: 0 });
    await expectPodAddressesHeld(client, held.size);
  }, 900_000);

  it('a running pod whose pool address no allocation holds, in the bundle or the cluster: named after the unlock (pod-ip-not-allocated), exit 3', async () => {
    // As a pod addressed outside Calico's IPAM leaves it: 192.168.250.250 lies in the pool, in no block.
    const stray = { namespace: DRIVER_NS, name: `${run}-stray`, node: NODES[1]!, handle: `k8s-pod-network.${run}stray`, ip: '192.168.250.250' };
    expect((await readIpam(client)).owners.get(stray.ip)).toBeUndefined();
    await podsUsingAddresses(client, [stray]);
    const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json']);
    const result = JSON.parse(r.stdout);
    expect(result.ipamProblems, r.stderr).toEqual([
      expect.stringMatching(new RegExp(`${stray.name}.*192\\.168\\.250\\.250.*pod-ip-not-allocated.*restart it`)),
    ]);
    expect(r.code, r.stderr).toBe(3);
    // The pod check, from the stored objects, sees the same address free in IPAM.
    expect((await podAddressProblems(client)).problems).toEqual([
      expect.stringContaining(`${stray.ip} of running pod ${stray.namespace}/${stray.name} is free in IPAM`),
    ]);
    await client.delete(K.pod, DRIVER_NS, stray.name, { gracePeriodSeconds: 0 });
  }, 900_000);
});
