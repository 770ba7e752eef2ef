/**
 * The seed's night in full on Calico's node side (issue 29, "What to build" 3): Calico 3.27.4 installed by the real
 * v1.32.10 operator (its tigera-operator.yaml and custom-resources.yaml, as the user did), calico-node's start-up and
 * tunnel allocator running per kwok node (three nodes) and the real CNI plugin giving every pod its address. The
 * user's pool migration: pods on default-ipv4-ippool (192.168.0.0/16, created by calico-node's start-up from the
 * Installation), then new-ipv4-pool created and default-ipv4-ippool disabled, more pods on the new pool. `backup`.
 * The upgrade to 3.28.1 by hand (its tigera-operator.yaml: the v1.34.3 operator re-enables the disabled pool,
 * calico#9100). Then what the team did: `kubectl delete -f` of 3.28.1's custom-resources.yaml (which, the v3 UIDs
 * having changed with 3.28.1's API server, may wait on the namespace the garbage collector lost: after a minute the
 * team asks doctor, which must say `namespace-owner-gone`, and restarts kube-controller-manager as it says) and
 * tigera-operator.yaml (every crd.projectcalico.org CRD, and with it every pool and IPAM record, gone; the pods run
 * on), and 3.27.4 applied again: start-up re-creates default-ipv4-ippool (enabled) and each node's tunnel allocator
 * re-claims its hostname-seeded block, the very block the node's 192.168 pods live in, now holding only the tunnel.
 * `restore <bundle> --resources` must put every pod's allocation back (each pod's address held by its own handle),
 * the pools as the user had them (default-ipv4-ippool disabled) and exit 0.
 * The second test runs the night again (3.27.4 deleted and applied again) with pods started between the reinstall
 * and the restore. IPAM offers them the re-claimed blocks' free addresses first, the ones the bundle's pods still
 * use, but the real plugin refuses each (the running pod's host route is on that node: "route ... already exists
 * for an interface other than ..."), calico-ipam releases it and the retried ADD gets the next one; so no duplicate
 * arises on the same node, and restore puts every bundle allocation back, exit 0. The duplicate-IP report (exit 3)
 * is for an address with no route on the newcomer's node, made outside the CNI plugin: restore-ipam-reclaim.test.ts.
 * Found here and fixed in src/restore (docs/troubleshooting.md, "The seed's night on Calico's node side"): the
 * operator's own pods, deleted by its teardown and started again by the reinstall, were named as duplicate IPs with
 * pods to restart that no longer existed (exit 3); and a node's tunnel address moved after the migration leaked
 * (restore kept the node's re-created IPAMHandle, which did not count the restored block).
 * Wall time (2 cores shared with other runs, programs cached, 2026-12-05): 181-214 s for the file, the first test
 * 86-128 s, the second 66-87 s; with restore leaving unused allocations out (4 runs): 171-252 s, the first test 82-126 s.
 * When `calicoctl ipam check` finds a handle with no matching IPs (seen on main in 1 of 2-3 runs, not in 4 runs since),
 * the test prints each such handle with its blocks, the audit trail and the cluster's log lines on it.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { calicoctl, waitOperator, withRealCalico } from './calico-support.js';
import { restartAsDoctorSays } from './doctor-support.js';
import { applyFixture, runCli } from './helpers.js';
import { IPAM_BLOCK, ipamCheck, readIpam } from './ipam-support.js';
import { waitNodeSideSettled } from './pod-churn.js';
import { expectPodAddressesHeld, podAddressProblems } from './pod-ip-support.js';
import {
  NS,
  POOL,
  createPods,
  handlesWithoutIpsTrail,
  install3274,
  kubectlDeleteRelease,
  unregisterStaleApiAsUserWould,
  poolStates,
  waitPodAddresses,
  waitTunnels,
} from './node-side-night-support.js';

// The node side runs each installed minor's own tree (nodeSideFor in calico-programs.ts): 3.27.4's, then 3.28.1's.
const NODE_SIDE = ['v3.27.4', 'v3.28.1'];
const real = withRealCalico('night', { operators: ['v1.32.10', 'v1.34.3'], calico: ['v3.28.1'], nodeSide: NODE_SIDE });
const NODES = ['night-node-1', 'night-node-2', 'night-node-3'];
const dir = mkdtempSync(path.join(os.tmpdir(), 'node-side-night-'));
const bundle = path.join(dir, 'bundle');
const BEFORE_MIGRATION = Array.from({ length: 6 }, (_, i) => `old-${i + 1}`);
const AFTER_MIGRATION = Array.from({ length: 9 }, (_, i) => `new-${i + 1}`);
const PODS = [...BEFORE_MIGRATION, ...AFTER_MIGRATION];
const started = Date.now();
const at = () => `${((Date.now() - started) / 1000).toFixed(0)} s`;
let client: KubeClient;
/** pod name -> the address the CNI plugin gave it before the backup */
let addresses: Map<string, string>;
let bundleBlocks: string[];
/** What the Calico supervisor logged so far (the node side logs every refused CNI ADD there). */
const supervisorLog = () => readFileSync(path.join(real.cluster.readState()!.workDir, 'calico-supervisor.log'), 'utf8');

/** What the team did next: `kubectl delete -f` of a release's custom-resources.yaml, then tigera-operator.yaml; 3.27.4 applied again. */
async function deleteAndReinstall(deleteVersion: string): Promise<Map<string, string>> {
  const cluster = real.cluster;
  const t0 = Date.now();
  // After 3.27.4 -> 3.28.1 the v3 UIDs have changed (v3-uids-change) and nobody restarted kube-controller-manager:
  // the deletion may wait on the namespace its garbage collector lost. The team asks doctor and does what it says.
  await kubectlDeleteRelease(cluster, deleteVersion, 'custom-resources.yaml', { whenStuck: (ms) => restartAsDoctorSays(cluster, client, ms) });
  // Deleted mid-teardown, the operator may leave the APIService of the API server it removed: the namespace then waits.
  await kubectlDeleteRelease(cluster, deleteVersion, 'tigera-operator.yaml', { whenStuck: (ms) => unregisterStaleApiAsUserWould(cluster, client, ms) });
  const left = (await client.listAll(K.crd)).filter((c) => c.spec.group === 'crd.projectcalico.org').map((c) => c.metadata.name);
  expect(left, 'every crd.projectcalico.org CRD deleted').toEqual([]);
  console.log(`${at()}: ${deleteVersion} deleted in ${((Date.now() - t0) / 1000).toFixed(0)} s; the pods still run`);
  await install3274(client, cluster);
  const tunnels = await waitTunnels(client, NODES, 'the reinstall');
  console.log(`${at()}: 3.27.4 installed again; tunnels ${JSON.stringify([...tunnels])}; pools ${JSON.stringify(await poolStates(client))}`);
  return tunnels;
}

describe('the seed night on the node side: 3.27.4, pods through the CNI plugin, backup, 3.28.1, kubectl delete -f, 3.27.4 again, restore', () => {
  beforeAll(async () => {
    client = real.client();
    await createFakeNodes(client, [{ name: NODES[2]!, ipIndex: 3 }]);
    await client.create(K.namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } }).catch(() => undefined);
  }, 600_000);

  afterAll(async () => {
    await client?.delete(K.namespace, undefined, NS).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
    console.log(`node-side-night: ${at()} in all`);
  }, 600_000);

  it(
    "every pod of the bundle holds its address in IPAM again, the pools are the user's, exit 0",
    async () => {
      const cluster = real.cluster;
      // 3.27.4 as its docs install it; calico-node's start-up creates default-ipv4-ippool from the Installation.
      await install3274(client, cluster);
      const firstTunnels = await waitTunnels(client, NODES, 'the install');
      expect((await poolStates(client))['default-ipv4-ippool']).toEqual({ cidr: '192.168.0.0/16', disabled: false });
      await createPods(client, BEFORE_MIGRATION, NODES);
      const oldAddrs = await waitPodAddresses(client, BEFORE_MIGRATION, '192.168.');

      // The user's migration (as in installIncident327): a new pool, the default one disabled; new pods go there.
      const pool = JSON.stringify({
        apiVersion: 'projectcalico.org/v3',
        kind: 'IPPool',
        metadata: { name: 'new-ipv4-pool' },
        spec: { cidr: '10.100.0.0/16', blockSize: 26, ipipMode: 'Never', vxlanMode: 'CrossSubnet', natOutgoing: true, nodeSelector: 'all()' },
      });
      await calicoctl(['create', '-f', '-'], pool);
      await calicoctl(['patch', 'ippool', 'default-ipv4-ippool', '-p', '{"spec":{"disabled":true}}']);
      await createPods(client, AFTER_MIGRATION, NODES);
      const newAddrs = await waitPodAddresses(client, AFTER_MIGRATION, '10.100.');
      addresses = new Map([...oldAddrs, ...newAddrs]);
      await expectPodAddressesHeld(client, PODS.length);
      console.log(`${at()}: ${PODS.length} pods addressed: ${JSON.stringify([...addresses])}; tunnels ${JSON.stringify([...firstTunnels])}`);

      const b = await runCli(['backup', '--allow-unprotected-nodes', '--out', bundle, '-o', 'json']);
      expect(b.code, b.stderr).toBe(0);
      bundleBlocks = (await client.listAll(IPAM_BLOCK)).map((x) => x.spec.cidr).sort();

      // The upgrade by hand: 3.28.1's tigera-operator.yaml; the v1.34.3 operator re-enables the pool (#9100).
      await applyFixture(client, '3.28.1', 'tigera-operator.yaml');
      await waitOperator(cluster, 'v1.34.3');
      await client.waitFor(
        'the v1.34 operator to re-enable default-ipv4-ippool (#9100)',
        async () => ((await client.get(POOL, undefined, 'default-ipv4-ippool')).spec.disabled ? undefined : true),
        { timeoutMs: 300_000, intervalMs: 1000 },
      );
      console.log(`${at()}: upgraded to 3.28.1; default-ipv4-ippool re-enabled by the operator`);

      await deleteAndReinstall('3.28.1');
      // The premise: each node re-claimed a block it had (libcalico-go seeds it from the hostname), every bundle pod
      // allocation is gone, and the running pods' addresses are free for the next pods.
      const reclaimed = (await client.listAll(IPAM_BLOCK)).map((x) => x.spec.cidr).sort();
      expect(reclaimed.length).toBeGreaterThan(0);
      expect(
        reclaimed.filter((c) => !bundleBlocks.includes(c)),
        `re-claimed ${reclaimed} vs the bundle's ${bundleBlocks}`,
      ).toEqual([]);
      expect((await podAddressProblems(client)).problems.length).toBeGreaterThanOrEqual(PODS.length);

      const restoreStarted = Date.now();
      const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json']);
      const result = JSON.parse(r.stdout || '{}');
      console.log(
        `${at()}: restore exit ${r.code} in ${((Date.now() - restoreStarted) / 1000).toFixed(0)} s; counts ${JSON.stringify(result.counts)}; ipamProblems ${JSON.stringify(result.ipamProblems ?? [])}; drifted ${JSON.stringify(result.drifted)}\nleft out of IPAM: ${
          r.stderr
            .split('\n')
            .filter((l) => /not put back|put back without knowing/.test(l))
            .join(' | ') || 'nothing'
        }\nstderr: ${r.stderr.slice(-2000)}`,
      );
      const { owners } = await readIpam(client);
      const lost = PODS.filter((p) => (owners.get(addresses.get(p)!) ?? []).length !== 1).map(
        (p) => `${p} ${addresses.get(p)}: ${owners.get(addresses.get(p)!)?.join() ?? 'free'}`,
      );
      expect(lost, `restore exit ${r.code}`).toEqual([]);
      await expectPodAddressesHeld(client, PODS.length);
      expect(r.code, r.stderr + r.stdout.slice(0, 4000)).toBe(0);
      const pools = await poolStates(client);
      expect(pools).toEqual({
        'default-ipv4-ippool': { cidr: '192.168.0.0/16', disabled: true },
        'new-ipv4-pool': { cidr: '10.100.0.0/16', disabled: false },
      });
      // Nothing re-enables it under the 3.27.4 operator (v1.32 leaves an existing pool alone).
      await new Promise((res) => setTimeout(res, 10_000));
      expect((await poolStates(client))['default-ipv4-ippool']?.disabled).toBe(true);
      // Judged once the node side has settled: a DEL in flight holds a handle without addresses for a moment, and a
      // pod the operator replaced after the restore keeps its address until its DEL has run (seen in a rehearsal).
      await waitNodeSideSettled(client, real.cluster, NODES);
      const check = await ipamCheck();
      const tunnelsNow = await waitTunnels(client, NODES, 'after the restore');
      console.log(`tunnels after the restore ${JSON.stringify([...tunnelsNow])}; calicoctl ipam check:\n${check.text}`);
      // No tunnel address leaked. After the migration each node's tunnel allocator moved its VXLAN address into
      // new-ipv4-pool; after the reinstall it took a 192.168 address under the same handle, and once restore disabled
      // that pool it released by handle and took another. Restore used to keep that live IPAMHandle as it was
      // (counting the 192.168 block only), so the release missed the bundle's tunnel allocation put back in
      // new-ipv4-pool: one address per node leaked for good (kube-controllers keeps a tunnel address while its node
      // exists). What may be listed (seen once in five runs, printed below with the pod's state): an allocation of one
      // of the operator's own pods that no running pod holds, such as one its teardown deleted put back where the
      // address was free; a pod leak, which kube-controllers' IPAM garbage collection frees after its grace period.
      const leaked = [...check.text.matchAll(/^\s+(\S+) leaked; attrs Main:(\S+) Extra:(\S*)/gm)].map((m) => `${m[1]} ${m[2]} ${m[3]}`);
      for (const l of leaked) {
        const [, ns, name] = /namespace=([^,]+),.*pod=([^,]+)/.exec(l) ?? [];
        const pod = ns && name ? await client.getOrUndefined(K.pod, ns, name) : undefined;
        const lines = name
          ? supervisorLog()
              .split('\n')
              .filter((x) => x.includes(name))
          : [];
        console.log(
          `leaked ${l}: pod ${pod ? `${pod.status?.phase} ${pod.status?.podIP} deleting=${!!pod.metadata.deletionTimestamp}` : 'gone'}; supervisor: ${lines.join(' | ')}`,
        );
      }
      expect(
        leaked.filter((l) => !/namespace=calico-(system|apiserver)\b/.test(l)),
        check.text,
      ).toEqual([]);
      if (check.handlesWithoutIps) console.log(`handles with no matching IPs:\n${await handlesWithoutIpsTrail(client, real.cluster.readState()!.workDir)}`);
      expect(
        {
          noAllocation: check.noAllocation,
          handlesWithoutIps: check.handlesWithoutIps,
          missingHandles: check.missingHandles,
          multipleOwners: check.multipleOwners,
        },
        check.text,
      ).toEqual({
        noAllocation: 0,
        handlesWithoutIps: 0,
        missingHandles: 0,
        multipleOwners: 0,
      });
    },
    45 * 60_000,
  );

  it(
    'pods started between the reinstall and the restore: the CNI plugin refuses the addresses running pods use on their node, restore puts every bundle allocation back, exit 0',
    async () => {
      // The night once more from where the first test left the cluster (3.27.4, the user's pools restored).
      await deleteAndReinstall('3.27.4');
      // Pods started before the restore. IPAM offers them the free addresses of the re-claimed blocks first, the
      // addresses the bundle's pods on default-ipv4-ippool still use; but each of those pods' host-side route is still
      // on its node, so the plugin's ADD fails for such an address (calico-ipam releases it) and is retried with the
      // next one, as a kubelet retries. No pod ends up with an address a running pod uses on the same node.
      const NEWCOMERS = NODES.flatMap((_, n) => [1, 2, 3].map((i) => `late-${n + 1}-${i}`));
      const logFrom = supervisorLog().length;
      await createPods(client, NEWCOMERS, NODES);
      const late = await waitPodAddresses(client, NEWCOMERS, '192.168.');
      const bundleAddrs = new Set(addresses.values());
      const refused = [
        ...supervisorLog()
          .slice(logFrom)
          .matchAll(/CNI ADD for \S+ failed: .*Dst: ([\d.]+)\/32.* already exists for an interface other than/g),
      ].map((m) => m[1]!);
      console.log(`${at()}: newcomers ${JSON.stringify([...late])}; ADDs refused for ${refused.join(', ')}`);
      expect(refused.filter((a) => bundleAddrs.has(a)).length, "an ADD refused for a bundle pod's address").toBeGreaterThan(0);
      expect(NEWCOMERS.filter((n) => bundleAddrs.has(late.get(n)!))).toEqual([]);

      const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json']);
      const result = JSON.parse(r.stdout || '{}');
      console.log(
        `${at()}: restore exit ${r.code}; counts ${JSON.stringify(result.counts)}; ipamProblems ${JSON.stringify(result.ipamProblems ?? [])}; drifted ${JSON.stringify(result.drifted)}; stdout ${r.stdout.slice(0, 4000)}`,
      );
      const { owners } = await readIpam(client);
      const lost = PODS.filter((p) => (owners.get(addresses.get(p)!) ?? []).length !== 1);
      expect(lost, `restore exit ${r.code}; stderr: ${r.stderr.slice(-3000)}`).toEqual([]);
      await expectPodAddressesHeld(client, PODS.length + NEWCOMERS.length);
      expect([...owners].filter(([, o]) => o.length > 1)).toEqual([]);
      expect(r.code, `restore exit ${r.code}; stdout ${r.stdout.slice(0, 3000)}; stderr ${r.stderr.slice(-3000)}`).toBe(0);
    },
    45 * 60_000,
  );
});
