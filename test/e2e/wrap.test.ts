/**
 * wrap with Calico's real programs: Calico 3.28.1 under the real v1.34.3 operator, a realistic population and real
 * allocations made by the IPAM driver (libcalico-go's IPAM client, as the CNI plugin calls it). The incident's
 * destructive downgrade step, `kubectl delete -f tigera-operator.yaml` of 3.28.1, run under `wrap
 * --restore-on-failure`: it deletes every Calico CRD (and with them every pool, IPAM object and policy) and the
 * operator itself, which leaves the Installation Terminating on the operator's finalizers that nothing can remove
 * any more. wrap's restore is refused (exit 5) and wrap prints the exact recovery commands; the user follows them
 * (the operator installed again, then `restore`), and everything is back: no allocation lost, `calicoctl ipam check`
 * finding only what it found before. Every allocation has its running Pod object (restore puts back only allocations
 * a running pod uses: src/restore/ipam-use.ts), so that check finds no leak at all. Also: a healthy command passes, and a failing command's exit code passes through.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import type { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { fixturePath, kubeconfig, operatorType, runCli } from './helpers.js';
import { kubectl, waitOperator, withRealCalico } from './calico-support.js';
import { expectIpamAsBefore, heldByLog, installPopulatedReal328, ipamCheck, readIpam, type DriverEvent } from './ipam-support.js';
import { calicoSnapshot } from './plan-support.js';
import { DRIVER_NS, podsForDriverAllocations } from './driver-pods.js';
import { podsForPopulation, populationPods } from './population-pods.js';
import { expectPodAddressesHeld } from './pod-ip-support.js';
import type { Population } from './population.js';

const NODES = ['fwr-node-1', 'fwr-node-2'];
const INSTALLATION = operatorType('installations', 'Installation');

describe('wrap with the real tigera operator: back up, run a risky command, check, restore on failure', () => {
  const real = withRealCalico('fwr');
  let client: KubeClient;
  let cluster: LocalCluster;
  let dir: string;
  let population: Population;
  let evs: DriverEvent[];
  /** How many pods the set-up made (the population's and the driver's), each holding its address. */
  let podCount: number;

  beforeAll(async () => {
    client = real.client();
    cluster = real.cluster;
    dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-wrap-e2e-'));
    ({ population, events: evs } = await installPopulatedReal328(client, cluster, { prefix: 'fwr', nodes: NODES, logFile: path.join(dir, 'driver.jsonl') }));
    // The pods behind the population's and the driver's allocations, running with those addresses.
    await podsForPopulation(client, population);
    await podsForDriverAllocations(client, evs, DRIVER_NS);
    podCount = populationPods(population).length + heldByLog(evs).size;
  }, 20 * 60_000);

  afterAll(async () => {
    for (const ns of [population?.namespace, DRIVER_NS]) if (ns) await client?.delete(K.namespace, undefined, ns).catch(() => undefined);
  });

  it('a harmless command: healthy, exit 0; a failing one: its exit code passes through with the restore command', async () => {
    const ok = await runCli(['wrap', '--out', path.join(dir, 'b-ok'), '-o', 'json', '--', 'true']);
    expect(ok.code, ok.stderr).toBe(0);
    const r = JSON.parse(ok.stdout);
    expect(r.check).toMatchObject({ healthy: true, lost: [], errors: [] });
    expect(r.bundle.path).toBe(path.join(dir, 'b-ok'));

    const bad = await runCli(['wrap', '--out', path.join(dir, 'b-bad'), '--', 'sh', '-c', 'exit 7']);
    expect(bad.code).toBe(7);
    expect(bad.stdout).toContain(`restore with: cni-rewind restore ${path.join(dir, 'b-bad')} --resources`);
    const none = await runCli(['wrap']);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/wrap needs a command after --/);
    await expectPodAddressesHeld(client, podCount);
  });

  it(
    'wrap --restore-on-failure -- kubectl delete -f <3.28.1 tigera-operator.yaml>: refused with the recovery commands; following them brings everything back',
    async () => {
      const held = heldByLog(evs);
      expect(held.size, 'the IPAM driver holds addresses').toBeGreaterThan(0);
      const before = await calicoSnapshot(client);
      const ipamBefore = await readIpam(client);
      const checkBefore = await ipamCheck();
      expect(checkBefore.leaked, checkBefore.text).toBe(0);
      const bundle = path.join(dir, 'b-delete');
      const kubectlBin = path.join(cluster.readState()!.binDir, 'kubectl');
      // With kubectl's default --wait the delete never returns (it waits up to a week for the Installation, whose
      // finalizers nothing removes any more); --wait=false ends it once everything is marked for deletion.
      const manifest = fixturePath('3.28.1', 'tigera-operator.yaml');
      const started = Date.now();
      // The command then waits (as kubectl's own --wait would) until the CRDs whose objects nothing holds are gone, so
      // what wrap finds lost does not depend on how far the API server got; the APIServer and Installation objects stay
      // or go depending on whether the operator removed their finalizers before it was deleted itself.
      const k = `${kubectlBin} --kubeconfig ${kubeconfig()}`;
      const dataCrds = ['ipamblocks', 'ipamhandles', 'blockaffinities', 'globalnetworkpolicies'].map((p) => `${p}.crd.projectcalico.org`).join(' ');
      const script = `${k} delete -f ${manifest} --wait=false && for i in $(seq 180); do [ -z "$(${k} get crd ${dataCrds} --ignore-not-found -o name)" ] && exit 0; sleep 1; done; exit 1`;
      const r = await runCli(['wrap', '--restore-on-failure', '--out', bundle, '--', 'sh', '-c', script], {
        timeoutMs: 900_000,
      });
      console.log(`wrap: exit ${r.code} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
      // kubectl succeeded; wrap saw the damage, its restore was refused (the operator that holds the finalizers is
      // gone), and it says exactly what to run.
      expect(r.code, r.stdout + r.stderr.slice(-3000)).toBe(5);
      expect(r.stdout).toMatch(/command {2}.*kubectl .*delete -f .*tigera-operator\.yaml --wait=false.* -> exit 0/);
      for (const kind of ['IPAMBlock', 'IPAMHandle', 'BlockAffinity', 'GlobalNetworkPolicy']) expect(r.stdout).toContain(`  - ${kind} `);
      expect(r.stdout).toMatch(/lost {5}\d+ Calico objects are no longer in the cluster/);
      expect(r.stdout).toMatch(/the restore was refused: being deleted: .*Installation default.*the operator is not installed/);
      const install =
        'kubectl apply --server-side --force-conflicts -f https://raw.githubusercontent.com/projectcalico/calico/v3.28.1/manifests/tigera-operator.yaml';
      expect(r.stdout).toContain(`recover with:\n  1. ${install}\n  2. cni-rewind restore ${bundle} --resources`);
      const stuck = await client.get(INSTALLATION, undefined, 'default');
      expect(stuck.metadata.deletionTimestamp).toBeDefined();
      expect(await client.getOrUndefined(K.deployment, 'tigera-operator', 'tigera-operator')).toBeUndefined();

      // A restore before the operator is back is refused at once with the same advice, and writes nothing.
      const early = await runCli(['restore', bundle, '--resources', '--yes']);
      expect(early.code, early.stderr).toBe(5);
      expect(early.stderr).toContain(`install the tigera operator again: ${install}`);
      expect(await client.getOrUndefined(K.crd, undefined, 'ippools.crd.projectcalico.org')).toBeUndefined();

      // The user follows the advice. Step 1 with the shipped copy of the same release file (checksummed in
      // calico-releases/index.json): tests only talk to 127.0.0.1.
      await kubectl(
        cluster,
        install
          .replace(/^kubectl /, '')
          .replace(/-f \S+$/, `-f ${manifest}`)
          .split(' '),
      );
      const t = Date.now();
      const rs = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json'], { timeoutMs: 1_500_000 });
      const result = JSON.parse(rs.stdout || '{}');
      console.log(
        `restore after the operator was installed again: exit ${rs.code} in ${((Date.now() - t) / 1000).toFixed(1)} s; ${JSON.stringify(result.counts)}`,
      );
      expect(rs.code, rs.stderr.slice(-3000)).toBe(0);
      expect(result.operator.checked).toEqual(
        expect.arrayContaining(['TigeraStatus calico Available (reported after the operator resumed)', 'calico-node rendered']),
      );
      await waitOperator(cluster, 'v1.34.3', 10_000);
      expect((await client.get(INSTALLATION, undefined, 'default')).metadata.deletionTimestamp).toBeUndefined();

      // Every Calico data object is back as it was.
      const after = await calicoSnapshot(client);
      for (const o of population.objects.filter((x) => x.apiVersion.startsWith('crd.projectcalico.org'))) {
        const k = `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
        expect(after.data[k], k).toBe(before.data[k]);
      }
      expect(Object.keys(after.data).sort()).toEqual(Object.keys(before.data).sort());
      // IPAM exactly as before: every address the driver held is allocated to its handle again, and
      // `calicoctl ipam check` finds nothing it did not find before: no leak (every allocation's pod runs).
      const ipamAfter = await readIpam(client);
      for (const [handle, ip] of held) expect(ipamAfter.owners.get(ip), ip).toEqual([handle]);
      await expectIpamAsBefore(client, ipamBefore, checkBefore, { withPods: true });
      await expectPodAddressesHeld(client, podCount);
    },
    30 * 60_000,
  );
});
