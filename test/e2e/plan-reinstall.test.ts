/**
 * `--strategy reinstall`: the users' delete-and-create procedure (which deletes every Calico CRD on 3.27/3.28)
 * made safe by the bundle, with Calico's real programs: a populated 3.28.1 cluster under the real v1.34.3 operator,
 * with addresses allocated through libcalico-go's IPAM (the IPAM driver), is downgraded to 3.27.4 by removing
 * everything and restoring all Calico data. Nothing may be lost, and the real v1.32.10 operator must end up running
 * Calico: calico-node rendered at v3.27.4, its own TigeraStatus Available, nothing Terminating (the Installation
 * owns calico-system, whose `tigera.io/cni-protector` finalizers only an uninstalling operator clears).
 * Every allocation has its running Pod object (restore puts back only allocations a running pod uses:
 * src/restore/ipam-use.ts), and the reinstall ends with every pod's address held in IPAM by that pod
 * (expectPodAddressesHeld).
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkAgainstSchema } from '../../src/calico/schema.js';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { crdResourceType } from '../../src/kube/discovery.js';
import type { KubeObject } from '../../src/kube/types.js';
import type { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { releasesDir } from '../support/releases.js';
import { canonicalJson } from '../../src/util/canonical.js';
import { applyFixture, calicoType, fixtureObjects, operatorType, runCli } from './helpers.js';
import { applyLogged, tigeraCondition, waitApiServiceAvailable, waitOperator, waitTigeraStatusAvailable, withRealCalico } from './calico-support.js';
import { expectIpamAsBefore, heldByLog, ipamCheck, readEvents, readIpam, startChurn } from './ipam-support.js';
import { calicoSnapshot } from './plan-support.js';
import { populateCalico, type Population } from './population.js';
import { DRIVER_NS, podsForDriverAllocations } from './driver-pods.js';
import { podsForPopulation, populationPods } from './population-pods.js';
import { expectPodAddressesHeld } from './pod-ip-support.js';

const NODES = ['rin-node-1', 'rin-node-2'];
const TIGERA_STATUS = operatorType('tigerastatuses', 'TigeraStatus');
const CLUSTER_INFO = calicoType('clusterinformations', 'ClusterInformation');

/** Everything of Calico's that is being deleted: namespaces, what they hold, and the operator's cluster RBAC. */
async function terminating(client: KubeClient): Promise<string[]> {
  const out: string[] = [];
  for (const ns of ['calico-system', 'calico-apiserver', 'tigera-operator']) {
    const n = await client.getOrUndefined(K.namespace, undefined, ns);
    if (n?.metadata.deletionTimestamp) out.push(`namespace ${ns}: ${JSON.stringify(n.status?.conditions?.filter((c: any) => c.status === 'True') ?? [])}`);
    for (const t of [K.pod, K.serviceAccount, K.daemonSet, K.deployment])
      for (const o of await client.listAll(t, { namespace: ns }))
        if (o.metadata.deletionTimestamp) out.push(`${o.kind} ${ns}/${o.metadata.name} (finalizers ${o.metadata.finalizers?.join(', ') || 'none'})`);
  }
  for (const t of [K.clusterRole, K.clusterRoleBinding])
    for (const o of await client.listAll(t))
      if (/calico|tigera/.test(o.metadata.name) && o.metadata.deletionTimestamp)
        out.push(`${o.kind} ${o.metadata.name} (finalizers ${o.metadata.finalizers?.join(', ')})`);
  return out;
}

describe('plan --strategy reinstall with the real tigera operators: delete-and-create without losing anything', () => {
  const real = withRealCalico('rin');
  let client: KubeClient;
  let cluster: LocalCluster;
  let dir: string;
  let population: Population;
  let held: Map<string, string>;
  /** How many pods this file made with Calico addresses (the population's and the IPAM driver's allocations). */
  let podCount = 0;

  beforeAll(async () => {
    client = real.client();
    cluster = real.cluster;
    dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-reinstall-e2e-'));
    await applyFixture(client, '3.28.1', 'tigera-operator.yaml');
    // Pools, IPAM, policies, BGP/Felix, and custom-resources.yaml's Installation and APIServer.
    population = await populateCalico(client, { prefix: 'rin', nodes: NODES });
    await waitOperator(cluster, 'v1.34.3');
    await waitApiServiceAvailable(client, 240_000);
    await waitTigeraStatusAvailable(client, 'calico');
    // The CNI plugin (and so the driver) refuses to work until ClusterInformation default says datastoreReady.
    await client.waitFor(
      'a ready datastore',
      async () => ((await client.getOrUndefined(CLUSTER_INFO, undefined, 'default'))?.spec?.datastoreReady ? true : undefined),
      {
        timeoutMs: 240_000,
        intervalMs: 500,
      },
    );
    // Real allocations as the CNI plugin makes them (blocks claimed, affinities, handles), before the backup.
    const log = path.join(dir, 'driver.jsonl');
    const churn = await startChurn(log, { nodes: NODES, prefix: `rin${Date.now().toString(36)}`, rate: 6, target: 6, durationS: 6 });
    expect(await churn.done).toBe(0);
    held = heldByLog(readEvents(log));
    // The pods behind the population's and the driver's allocations, running with those addresses.
    await podsForPopulation(client, population);
    await podsForDriverAllocations(client, readEvents(log), DRIVER_NS);
    podCount = populationPods(population).length + held.size;
    await expectPodAddressesHeld(client, podCount);
  }, 20 * 60_000);

  afterAll(async () => {
    for (const ns of [population?.namespace, DRIVER_NS]) if (ns) await client?.delete(K.namespace, undefined, ns).catch(() => undefined);
  });

  it(
    'removes 3.28.1 (CRDs and all), installs 3.27.4, restores every pool, IPAM object and policy unchanged; v1.32.10 runs Calico, nothing Terminating',
    async () => {
      expect(held.size, 'the IPAM driver holds addresses').toBeGreaterThan(0);
      const before = await calicoSnapshot(client);
      const ipamBefore = await readIpam(client);
      const checkBefore = await ipamCheck();
      expect(checkBefore.leaked, checkBefore.text).toBe(0);
      const bundle = path.join(dir, 'bundle');
      const e = await runCli(['export', '--out', bundle]);
      expect(e.code, e.stderr).toBe(0);
      const plan = path.join(dir, 'plan.json');
      const p = await runCli([
        'plan',
        '--to',
        '3.27.4',
        '--manifests',
        releasesDir(),
        '--bundle',
        bundle,
        '--no-disk-snapshots',
        '--strategy',
        'reinstall',
        '--out',
        plan,
        '-o',
        'json',
      ]);
      expect(p.code, p.stderr).toBe(0);
      const planned = JSON.parse(p.stdout);
      expect(planned.steps.map((s: any) => s.id)).toEqual([
        'preflight',
        'pause-operator',
        'remove-old',
        'install-target',
        'restore-data',
        // v1.34.3's own Installation finalizers, which v1.32 never clears (the restore of the bundle writes them only if the target defines them).
        'remove-operator-leftovers',
        'transform-installation',
        'resume-operator',
        'wait-rollout',
        'verify-data',
      ]);

      // Watch the IPPool CRD's uid: a reinstall really deletes and re-creates it.
      const uidBefore = (await client.get(K.crd, undefined, 'ippools.crd.projectcalico.org')).metadata.uid;
      const r = await applyLogged(plan, 'reinstall');
      const res = r.res;
      expect(r.code, r.stderr + r.stdout).toBe(0);
      expect((await client.get(K.crd, undefined, 'ippools.crd.projectcalico.org')).metadata.uid).not.toBe(uidBefore);

      // The real v1.32.10 operator runs Calico 3.27.4: it rendered calico-node (and owns it), and reports on it.
      await waitOperator(cluster, 'v1.32.10', 10_000);
      const inst = await client.get(operatorType('installations', 'Installation'), undefined, 'default');
      const node = await client.get(K.daemonSet, 'calico-system', 'calico-node');
      expect(node.spec.template.spec.containers.find((c: any) => c.name === 'calico-node').image).toMatch(/:v3\.27\.4$/);
      expect(node.metadata.ownerReferences?.find((o: any) => o.controller)?.uid, 'calico-node adopted by the new Installation').toBe(inst.metadata.uid);
      await waitTigeraStatusAvailable(client, 'calico', 120_000);
      expect(res.steps.find((s: any) => s.id === 'wait-rollout').summary).toMatch(/calico-node rendered at v3\.27\.4/);
      // Nothing left Terminating, also a while after apply (the garbage collector acts in the background).
      expect(await terminating(client)).toEqual([]);
      await new Promise((res) => setTimeout(res, 10_000));
      expect(await terminating(client)).toEqual([]);
      expect(tigeraCondition(await client.get(TIGERA_STATUS, undefined, 'calico'), 'Degraded')).not.toBe('True');

      const after = await calicoSnapshot(client);
      for (const o of population.objects.filter((x) => x.apiVersion.startsWith('crd.projectcalico.org'))) {
        const k = `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
        expect(after.data[k], k).toBe(before.data[k]);
      }
      const calicoKeys = (s: typeof before) =>
        Object.keys(s.data)
          .filter((k) => !k.startsWith('Installation/') && !k.startsWith('APIServer/'))
          .sort();
      expect(calicoKeys(after)).toEqual(calicoKeys(before));
      expect(after.operator).toEqual({ image: 'quay.io/tigera/operator:v1.32.10', replicas: 1 });
      const want = fixtureObjects('3.27.4', 'tigera-operator.yaml').filter((o) => o.kind === 'CustomResourceDefinition');
      for (const crd of want)
        expect(after.crds[crd.metadata.name], crd.metadata.name).toBe(canonicalJson(crd.spec.versions.map((v: any) => ({ name: v.name, schema: v.schema }))));
      const instCrd = want.find((c) => c.metadata.name === 'installations.operator.tigera.io')!;
      const live = await client.get(crdResourceType(instCrd), undefined, 'default');
      const { status: _s, ...noStatus } = live;
      expect(checkAgainstSchema(noStatus as KubeObject, instCrd)).toEqual([]);
      expect(live.spec.calicoNetwork.ipPools).toHaveLength(1);
      expect(live.spec.calicoNetwork.ipPools[0]).toMatchObject({ cidr: '192.168.0.0/16', encapsulation: 'VXLANCrossSubnet' });

      // IPAM exactly as before: every address allocated to the same handle (the driver's included), and
      // `calicoctl ipam check` finds nothing it did not find before: no leak (every allocation's pod runs).
      const ipamAfter = await readIpam(client);
      for (const [, ip] of held) expect(ipamAfter.owners.get(ip), ip).toEqual(ipamBefore.owners.get(ip));
      const check = await expectIpamAsBefore(client, ipamBefore, checkBefore, { withPods: true });
      expect(check.outsidePoolIps.filter((ip) => ip.startsWith('192.168.') || ip.startsWith('10.240.'))).toEqual([]);
      // Every running pod's address is held by that pod alone: none free for the next pod, none shared.
      await expectPodAddressesHeld(client, podCount);
    },
    20 * 60_000,
  );
});
