/**
 * The other direction: a populated Calico 3.27.4 operator install upgraded in place to 3.28.1 with plan + apply,
 * with Calico's real programs: the v1.32.10 operator runs 3.27.4, and after `apply` the real v1.34.3 operator
 * (through the real Calico API server) runs 3.28.1. Every allocation of the population has its running Pod object
 * (podsForPopulation), so the upgrade ends with every pod's address held in IPAM by that pod (expectPodAddressesHeld).
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import type { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { releasesDir } from '../support/releases.js';
import { canonicalJson } from '../../src/util/canonical.js';
import { applyFixture, calicoType, fixtureObjects, runCli } from './helpers.js';
import { waitApiServiceAvailable, waitOperator, waitTigeraStatusAvailable, withRealCalico } from './calico-support.js';
import { ipamCheck, ipamProblems, readIpam } from './ipam-support.js';
import { calicoSnapshot } from './plan-support.js';
import { poolFor } from './doctor-support.js';
import { populateCalico, type Population } from './population.js';
import { podsForPopulation, populationPods } from './population-pods.js';
import { expectPodAddressesHeld } from './pod-ip-support.js';

const POOL = calicoType('ippools', 'IPPool');

describe('plan and apply: upgrade 3.27.4 -> 3.28.1 in place under the real tigera operators', () => {
  const real = withRealCalico('fup');
  let client: KubeClient;
  let cluster: LocalCluster;
  let dir: string;
  let population: Population;

  beforeAll(async () => {
    client = real.client();
    cluster = real.cluster;
    dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-upgrade-e2e-'));
    await applyFixture(client, '3.27.4', 'tigera-operator.yaml');
    population = await populateCalico(client, { prefix: 'fup', nodes: ['fup-node-1', 'fup-node-2'], customResources: '3.27.4' });
    await waitOperator(cluster, 'v1.32.10');
    await waitApiServiceAvailable(client, 240_000);
    await waitTigeraStatusAvailable(client, 'calico');
    // The pods behind the population's allocations, running with those addresses, as the CNI plugin leaves them.
    expect(populationPods(population).length, 'pods with Calico addresses').toBeGreaterThan(0);
    await podsForPopulation(client, population);
    await expectPodAddressesHeld(client, populationPods(population).length);
  }, 20 * 60_000);

  afterAll(async () => {
    if (population) await client?.delete(K.namespace, undefined, population.namespace).catch(() => undefined);
  });

  it('a disabled pool listed in the Installation (calico#9100): the plan unlists it instead of letting the operator re-enable it', async () => {
    // The incident's 3.27 state: default-ipv4-ippool (the Installation's entry) disabled after a pool migration.
    // Written as libcalico-go stores a pool (allowedUses filled in): the operator compares it with the entry exactly,
    // and an entry's allowedUses defaults to [Workload, Tunnel], so a pool without them would never be adopted.
    // 3.27 has no pool controller: the pool carries no operator label.
    const pool = poolFor('default-ipv4-ippool', '192.168.0.0/16', { disabled: true });
    await client.apply(POOL, { ...pool, metadata: { name: 'default-ipv4-ippool' } }, { fieldManager: 'fup' });
    try {
      const bundle = path.join(dir, 'bundle-9100');
      expect((await runCli(['export', '--out', bundle])).code).toBe(0);
      // doctor --target names the trap and its fix ...
      const d = await runCli(['doctor', '--target', '3.28.1', '-o', 'json']);
      expect(
        JSON.parse(d.stdout).findings.map((f: any) => f.id),
        d.stderr,
      ).toContain('pool-disabled-will-be-reenabled');
      // ... and the plan carries the fix out itself: a transform, shown, with the pool preflight passing on it.
      const p = await runCli(['plan', '--to', '3.28.1', '--bundle', bundle, '--no-disk-snapshots', '--out', path.join(dir, 'plan-9100.yaml'), '-o', 'json']);
      expect(p.code, p.stdout + p.stderr).toBe(0);
      const out = JSON.parse(p.stdout);
      expect(out.findings.find((f: any) => f.id === 'installation-disabled-pool-stop-allocations')).toMatchObject({
        action: 'transform',
        objects: ['IPPool/default-ipv4-ippool', 'Installation/default'],
      });
      // Unlabelled, the pool is unlisted: stopped with nodeSelector "!all()", its entry would no longer equal it and
      // v1.34.3 would refuse it on every reconcile ("Cannot update an IP pool not owned by the operator").
      expect(out.transforms.installation.stopAllocations).toBeUndefined();
      expect(out.transforms.installation.unlistPools).toEqual({ cidrs: ['192.168.0.0/16'] });
      expect(out.preflight.find((c: any) => c.name === 'target-operator-pools')).toMatchObject({ ok: true, blocking: true });
      const table = await runCli(['plan', '--to', '3.28.1', '--bundle', bundle, '--no-disk-snapshots']);
      expect(table.stdout + table.stderr).toMatch(/disabled IP pool\(s\) listed in the Installation: the v3\.28\.1 operator would re-enable them/);
    } finally {
      await client.delete(POOL, undefined, 'default-ipv4-ippool');
    }
  });

  it(
    'finds nothing to transform, applies 3.28.1 CRDs and operator v1.34.3, which then runs Calico, and keeps every Calico object as it was',
    async () => {
      const before = await calicoSnapshot(client);
      const ipamBefore = await readIpam(client);
      const checkBefore = await ipamCheck();
      const bundle = path.join(dir, 'bundle');
      expect((await runCli(['export', '--out', bundle])).code).toBe(0);
      const plan = path.join(dir, 'plan.yaml');
      const p = await runCli(['plan', '--to', '3.28.1', '--manifests', releasesDir(), '--bundle', bundle, '--no-disk-snapshots', '--out', plan, '-o', 'json']);
      expect(p.code, p.stderr).toBe(0);
      const out = JSON.parse(p.stdout);
      expect(out).toMatchObject({ direction: 'upgrade', current: { version: 'v3.27.4' }, target: { version: 'v3.28.1' } });
      expect(out.findings.filter((f: any) => f.action !== 'none' && f.action !== 'keep')).toEqual([]);
      expect(out.transforms.installation).toEqual({ removeFields: [], trimPoolsPerFamily: false });

      const started = Date.now();
      const r = await runCli(['apply', plan, '--yes', '-o', 'json']);
      expect(r.code, r.stderr + r.stdout).toBe(0);
      const res = JSON.parse(r.stdout);
      console.log(`upgrade: ${((Date.now() - started) / 1000).toFixed(1)} s; ${res.steps.map((s: any) => `${s.id} ${(s.ms / 1000).toFixed(1)}s`).join(', ')}`);
      // apply waited for what the real v1.34.3 operator did: calico-node rendered at 3.28.1, its TigeraStatus.
      await waitOperator(cluster, 'v1.34.3', 10_000);
      expect(res.steps.find((s: any) => s.id === 'wait-rollout').summary).toMatch(/calico-node rendered at v3\.28\.1.*TigeraStatus calico Available/);
      const node = await client.get(K.daemonSet, 'calico-system', 'calico-node');
      expect(node.spec.template.spec.containers.find((c: any) => c.name === 'calico-node').image).toMatch(/:v3\.28\.1$/);

      const after = await calicoSnapshot(client);
      expect(after.operator).toEqual({ image: 'quay.io/tigera/operator:v1.34.3', replicas: 1 });
      for (const crd of fixtureObjects('3.28.1', 'tigera-operator.yaml').filter((o) => o.kind === 'CustomResourceDefinition')) {
        expect(after.crds[crd.metadata.name], crd.metadata.name).toBe(canonicalJson(crd.spec.versions.map((v: any) => ({ name: v.name, schema: v.schema }))));
      }
      // Every object the population wrote is as it was; the operators' own writes are theirs.
      for (const o of population.objects.filter((x) => x.apiVersion.startsWith('crd.projectcalico.org'))) {
        const k = `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
        expect(after.data[k], k).toBe(before.data[k]);
      }
      // Nothing else changed but what v1.34.3 writes itself: its defaults in the Installation (verify-data allowed
      // only those), and the Installation's pool, which it creates through the v3 API (under 3.27 calico-node
      // creates it, and no calico-node runs here).
      const changed = Object.keys({ ...before.data, ...after.data }).filter((k) => before.data[k] !== after.data[k]);
      expect(changed.sort()).toEqual(['IPPool//default-ipv4-ippool', 'Installation//default']);
      expect(before.data['IPPool//default-ipv4-ippool']).toBeUndefined();
      // IPAM untouched, `calicoctl ipam check` finds nothing it did not find before and no leak (every allocation's
      // pod runs), and every pod's address is still held by that pod.
      expect((await readIpam(client)).owners).toEqual(ipamBefore.owners);
      const check = await ipamCheck();
      expect(ipamProblems(check), check.text).toEqual(ipamProblems(checkBefore));
      expect(ipamProblems(check)).toMatchObject({ leakedIps: [], noAllocation: 0, handlesWithoutIps: 0, missingHandles: 0, multipleOwners: 0 });
      await expectPodAddressesHeld(client, populationPods(population).length);
    },
    20 * 60_000,
  );
});
