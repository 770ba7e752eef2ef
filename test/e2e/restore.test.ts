/**
 * restore --resources on the real control plane with Calico's real programs (the tigera operators v1.34.3 and
 * v1.32.10, the Calico API server, kube-controllers; allocations by the IPAM driver), what comes back:
 * - the incident: export, delete every Calico CRD under the running operator, restore --yes: everything back with the
 *   same spec, diff exits 0; the nodes' tunnel addresses (calico-node's, `ipam-driver tunnel`) allocated to their
 *   handles again and named by the Nodes, which the CRD deletion left alone;
 * - export, edit and delete a few objects: --dry-run lists exactly those and writes nothing; the real run fixes exactly those;
 * - owner references re-linked or dropped; --existing skip|replace; --prune.
 * The driver's allocations have their Pod objects (restore puts back only allocations a running pod uses);
 * `calicoctl ipam check` finds no problem after each test.
 * The guards (operator, datastore lock, other cluster) are in restore-guards.test.ts; a pool the operator manages
 * and a 3.28.1 bundle onto 3.27.4 CRDs in restore-operator-versions.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject } from '../../src/kube/types.js';
import { calicoType, explain, operatorType, runCli } from './helpers.js';
import { expectDriverPodsIntact } from './driver-pods.js';
import { heldByLog } from './ipam-support.js';
import { allocateTunnels, expectTunnelsIntact } from './tunnel-support.js';
import {
  APP_NS,
  T,
  c,
  datastoreReady,
  deleteCalicoCrds,
  exportTo,
  operatorReplicas,
  population,
  resourceVersions,
  restoreSuite,
  specs,
} from './restore-support.js';

describe('restore --resources on a real cluster with the real Calico programs', () => {
  let client: KubeClient;
  // The driver's allocations get their Pod objects: restore puts back only allocations a running pod uses.
  const suite = restoreSuite('rst', (c) => (client = c), { driverPods: true });
  const work = suite.work;
  const APISERVER = operatorType('apiservers', 'APIServer');
  afterEach(async () => {
    await expectDriverPodsIntact(client, suite.events());
  });

  it('brings everything back after every Calico CRD was deleted under the running operator (the incident), and diff then exits 0', async () => {
    // calico-node's start on each node: a VXLAN tunnel address from default-ipv4-ippool (legacy-pool's IPIP is disabled).
    const tunnels = await allocateTunnels(['rst-node-1', 'rst-node-2']);
    expect(tunnels.map((t) => [!!t.vxlan, t.ipip])).toEqual([
      [true, ''],
      [true, ''],
    ]);
    const before = await specs(client);
    expect(Object.keys(before).length).toBeGreaterThanOrEqual(population().length + 2);
    const replicas = await operatorReplicas(client);
    const bundle = await exportTo(work, 'incident');
    const ca = (await client.get(K.secret, 'tigera-operator', 'tigera-ca-private')).data;

    await deleteCalicoCrds(client);
    expect(await client.getOrUndefined(K.crd, undefined, 'ippools.crd.projectcalico.org')).toBeUndefined();

    const started = Date.now();
    const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json'], { timeoutMs: 1_500_000 });
    console.log(`incident restore: exit ${r.code} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    expect(r.code, explain(r)).toBe(0);
    const result = JSON.parse(r.stdout);
    expect(result.ok).toBe(true);
    // The missing CRDs are created first (the operator's teardown needs them), the installations CRD once it is gone.
    const created = [...r.stderr.matchAll(/creating \d+ CRD\(s\) from the bundle: (.*)/g)].flatMap((m) => m[1]!.split(', '));
    expect(created).toContain('ippools.crd.projectcalico.org');
    expect(created).toContain('installations.operator.tigera.io');
    expect(result.failures).toEqual([]);
    // The default pool is an Installation entry of operator v1.34: said so.
    const pool = result.actions.find((a: any) => a.id === 'IPPool default-ipv4-ippool');
    expect(pool.notes.join(' ')).toMatch(/restored through Installation entry default-ipv4-ippool/);
    // Order: IPAM before pools (calico-node's tunnel allocator claims blocks once a pool exists) before policies.
    const order = result.actions.filter((a: any) => a.outcome === 'done').map((a: any) => a.phase);
    expect(order.indexOf('ipam')).toBeLessThan(order.indexOf('ip-pools'));
    expect(order.indexOf('ip-pools')).toBeLessThan(order.indexOf('policies'));
    // Where the time went, per phase, for -o json users (and bench/restore.ts).
    for (const phase of ['readBundle', 'readCluster', 'createCrds', 'guards', 'write', 'driftCheck', 'total'])
      expect(result.timings[phase], phase).toBeGreaterThanOrEqual(0);
    expect(result.timings.total).toBeGreaterThanOrEqual(result.timings.write);

    expect(await specs(client)).toEqual(before);
    expect(await operatorReplicas(client)).toBe(replicas);
    expect(await datastoreReady(client)).toBe(true);

    const d = await runCli(['diff', bundle]);
    expect(d.code, d.stdout + d.stderr).toBe(0);
    await expectTunnelsIntact(client, tunnels, { doctor: true });

    // What the deleted Installation owned (calico-system, the operator's CA) was kept from the garbage collector, which
    // deletes it once the installations CRD is served again (16 s after, measured; owners.ts), and is linked to the
    // restored Installation. The CA is the bundle's still: the operator did not make a new one and re-sign everything.
    await new Promise((r) => setTimeout(r, 20_000));
    const inst = await client.get(T.installation, undefined, 'default');
    const calicoNs = await client.get(K.namespace, undefined, 'calico-system');
    expect(calicoNs.metadata.deletionTimestamp).toBeUndefined();
    expect(calicoNs.metadata.ownerReferences?.map((o) => `${o.kind} ${o.uid}`)).toEqual([`Installation ${inst.metadata.uid}`]);
    expect((await client.get(K.secret, 'tigera-operator', 'tigera-ca-private')).data).toEqual(ca);
    expect(await specs(client)).toEqual(before);
  });

  it('keeps what an owner of a deleted CRD owned from the garbage collector once restore serves the kind again, and links it to the restored owner', async () => {
    // The incident's calico-system in small: an owner gone with its CRD, what it owned left with a reference nobody
    // can judge. A BGPFilter here (nothing else watches it), so no operator re-links it and the outcome is the restore's.
    const FILTER = calicoType('bgpfilters', 'BGPFilter');
    const filter = await client.create(
      FILTER,
      c('BGPFilter', 'rst-owner-filter', { exportV4: [{ action: 'Reject', matchOperator: 'In', cidr: '10.9.0.0/16' }] }),
    );
    const ref = { apiVersion: 'crd.projectcalico.org/v1', kind: 'BGPFilter', name: 'rst-owner-filter', uid: filter.metadata.uid! };
    await client.create(T.gns, {
      ...c('GlobalNetworkSet', 'owned-by-filter', { nets: ['192.0.2.0/24'] }),
      metadata: { name: 'owned-by-filter', ownerReferences: [ref] },
    });
    const bundle = await exportTo(work, 'gone-owner');

    // The set is released from its owner while the CRD goes (the collector would delete it while it still knows the
    // kind), then the reference is put back once the collector has forgotten the kind (it re-reads discovery every 30 s).
    await client.mergePatch(T.gns, undefined, 'owned-by-filter', { metadata: { ownerReferences: null } });
    await client.delete(K.crd, undefined, 'bgpfilters.crd.projectcalico.org');
    await client.waitFor(
      'the bgpfilters CRD to be gone',
      async () => ((await client.getOrUndefined(K.crd, undefined, 'bgpfilters.crd.projectcalico.org')) ? undefined : true),
      {
        timeoutMs: 60_000,
      },
    );
    await new Promise((r) => setTimeout(r, 45_000));
    await client.mergePatch(T.gns, undefined, 'owned-by-filter', { metadata: { ownerReferences: [ref] } });
    await new Promise((r) => setTimeout(r, 10_000));
    expect(await client.getOrUndefined(T.gns, undefined, 'owned-by-filter'), 'the collector cannot judge a kind nobody serves').toBeDefined();

    // The preview lists it although its content is unchanged: restore writes to it.
    const dry = await runCli(['restore', bundle, '--resources', '--dry-run']);
    expect(dry.code, explain(dry)).toBe(0);
    expect(dry.stdout).toMatch(/unchanged\s+GlobalNetworkSet owned-by-filter\s.*owned by BGPFilter rst-owner-filter, which is gone/);
    const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json'], { timeoutMs: 1_500_000 });
    expect(r.code, explain(r)).toBe(0);
    const result = JSON.parse(r.stdout);
    expect(result.crdsToCreate).toEqual(['bgpfilters.crd.projectcalico.org']);
    const restored = await client.get(FILTER, undefined, 'rst-owner-filter');
    expect(restored.metadata.uid).not.toBe(filter.metadata.uid);
    // Without the restore's release the collector deletes the set 16-30 s after the CRD is back (measured): still there.
    await new Promise((r) => setTimeout(r, 40_000));
    const set = await client.getOrUndefined(T.gns, undefined, 'owned-by-filter');
    expect(set, 'deleted by the garbage collector after the restore').toBeDefined();
    expect(set!.metadata.ownerReferences).toEqual([expect.objectContaining({ kind: 'BGPFilter', name: 'rst-owner-filter', uid: restored.metadata.uid })]);
    expect(set!.spec.nets).toEqual(['192.0.2.0/24']);
    expect(result.actions.find((a: any) => a.id === 'GlobalNetworkSet owned-by-filter').goneOwners).toEqual(['BGPFilter rst-owner-filter']);

    await client.delete(FILTER, undefined, 'rst-owner-filter');
    await client.waitFor(
      'the set owned by the filter to be collected',
      async () => ((await client.getOrUndefined(T.gns, undefined, 'owned-by-filter')) ? undefined : true),
      {
        timeoutMs: 120_000,
      },
    );
  });

  it('--dry-run lists exactly the edited and deleted objects and writes nothing; the real run fixes exactly those', async () => {
    const bundle = await exportTo(work, 'edits');
    const before = await specs(client);
    // A handle of a real allocation (the IPAM driver's): its block still names it, so restore creates it again.
    const [handle] = heldByLog(suite.events()).keys();
    // Edit two objects, delete two.
    await client.mergePatch(T.gnp, undefined, 'default.allow-dns', { spec: { order: 999 } });
    await client.mergePatch(T.felix, undefined, 'default', { spec: { logSeverityScreen: 'Debug' } });
    await client.delete(T.ipamhandle, undefined, handle!);
    await client.delete(T.np, APP_NS, 'default.web');
    const rvBefore = await resourceVersions(client);
    const instGeneration = (await client.get(T.installation, undefined, 'default')).metadata.generation;

    const dry = await runCli(['restore', bundle, '--resources', '--dry-run', '-o', 'json']);
    expect(dry.code, dry.stderr).toBe(0);
    const plan = JSON.parse(dry.stdout);
    const changes = plan.actions
      .filter((a: any) => a.action !== 'unchanged')
      .map((a: any) => `${a.action} ${a.id}`)
      .sort();
    expect(changes).toEqual([
      `create IPAMHandle ${handle}`,
      `create NetworkPolicy ${APP_NS}/default.web`,
      'update FelixConfiguration default',
      'update GlobalNetworkPolicy default.allow-dns',
    ]);
    expect(plan.actions.find((a: any) => a.id === 'GlobalNetworkPolicy default.allow-dns').diff).toMatch(/-\s+order: 999\n\+\s+order: 100/);
    expect(await resourceVersions(client)).toEqual(rvBefore);

    const table = await runCli(['restore', bundle, '--resources', '--dry-run']);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/update\s+FelixConfiguration default/);
    expect(table.stdout).toContain('Dry run: nothing was written.');

    // Without --yes and without a terminal: refused, nothing written.
    const refused = await runCli(['restore', bundle, '--resources']);
    expect(refused.code, refused.stderr).toBe(5);
    expect(refused.stderr).toMatch(/not confirmed/);
    expect(await resourceVersions(client)).toEqual(rvBefore);

    const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout);
    expect(
      result.actions
        .filter((a: any) => a.outcome === 'done')
        .map((a: any) => a.id)
        .sort(),
    ).toEqual(['FelixConfiguration default', 'GlobalNetworkPolicy default.allow-dns', `IPAMHandle ${handle}`, `NetworkPolicy ${APP_NS}/default.web`]);
    expect(await specs(client)).toEqual(before);
    // Nothing else was touched. The resumed operator writes the Installation's status (its resourceVersion moves),
    // never its spec (generation).
    const rvAfter = await resourceVersions(client);
    for (const [k, v] of Object.entries(rvBefore)) {
      const written = ['FelixConfiguration default', 'GlobalNetworkPolicy default.allow-dns', 'ClusterInformation default', 'Installation default'];
      if (!written.includes(k)) expect(rvAfter[k], k).toBe(v);
    }
    expect((await client.get(T.installation, undefined, 'default')).metadata.generation).toBe(instGeneration);
  });

  it('re-links ownerReferences to the new owner UID or drops them with a warning; --existing skip|replace; --prune only when asked', async () => {
    const inst = await client.get(T.installation, undefined, 'default');
    await client.apply(K.namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'rst-owner' } }, { fieldManager: 'rst-e2e' });
    const ownerNs = await client.get(K.namespace, undefined, 'rst-owner');
    const owned = (name: string, ref: { apiVersion: string; kind: string; name: string; uid: string }): KubeObject => ({
      ...c('GlobalNetworkSet', name, { nets: ['192.0.2.0/24'] }),
      metadata: { name, ownerReferences: [ref] },
    });
    await client.create(
      T.gns,
      owned('owned-by-installation', { apiVersion: 'operator.tigera.io/v1', kind: 'Installation', name: 'default', uid: inst.metadata.uid! }),
    );
    await client.create(T.gns, owned('owned-by-namespace', { apiVersion: 'v1', kind: 'Namespace', name: 'rst-owner', uid: ownerNs.metadata.uid! }));
    const bundle = await exportTo(work, 'owners');

    // Owners go away: the Installation as Calico's docs uninstall it, with its APIServer (the real operator keeps the
    // Installation until the API server is gone), and a namespace; once the operator's teardown has finished, the
    // garbage collector (real kube-controller-manager) deletes what they owned.
    await client.delete(APISERVER, undefined, 'default');
    await client.delete(T.installation, undefined, 'default');
    await client.delete(K.namespace, undefined, 'rst-owner');
    await client.waitFor(
      'the owned sets to be garbage-collected',
      async () =>
        (await client.getOrUndefined(T.gns, undefined, 'owned-by-installation')) || (await client.getOrUndefined(T.gns, undefined, 'owned-by-namespace'))
          ? undefined
          : true,
      { timeoutMs: 300_000 },
    );

    const started = Date.now();
    const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json'], { timeoutMs: 1_500_000 });
    console.log(`restore after the uninstall: exit ${r.code} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(
      /GlobalNetworkSet owned-by-namespace: ownerReferences to Namespace rst-owner dropped: the owner is neither in the cluster nor in the bundle/,
    );
    const newInst = await client.get(T.installation, undefined, 'default');
    expect(newInst.metadata.uid).not.toBe(inst.metadata.uid);
    const byInst = await client.get(T.gns, undefined, 'owned-by-installation');
    expect(byInst.metadata.ownerReferences).toEqual([expect.objectContaining({ kind: 'Installation', name: 'default', uid: newInst.metadata.uid })]);
    expect((await client.get(T.gns, undefined, 'owned-by-namespace')).metadata.ownerReferences).toBeUndefined();
    // The garbage collector leaves the re-linked set alone (it would delete one pointing at the old UID).
    await new Promise((res) => setTimeout(res, 5000));
    expect(await client.getOrUndefined(T.gns, undefined, 'owned-by-installation')).toBeDefined();

    // --existing skip leaves a changed object as it is, and says so; replace re-creates it.
    await client.mergePatch(T.gns, undefined, 'blocked-ranges', { spec: { nets: ['198.51.100.0/25'] } });
    const uidBefore = (await client.get(T.gns, undefined, 'blocked-ranges')).metadata.uid;
    const skip = await runCli(['restore', bundle, '--resources', '--yes', '--existing', 'skip', '--kinds', 'GlobalNetworkSet', '-o', 'json']);
    expect(skip.code, skip.stderr).toBe(0);
    expect(JSON.parse(skip.stdout).actions.find((a: any) => a.id === 'GlobalNetworkSet blocked-ranges')).toMatchObject({
      action: 'skip',
      reason: expect.stringContaining('--existing skip'),
    });
    expect((await client.get(T.gns, undefined, 'blocked-ranges')).spec.nets).toEqual(['198.51.100.0/25']);
    const replace = await runCli(['restore', bundle, '--resources', '--yes', '--existing', 'replace', '--kinds', 'GlobalNetworkSet', '-o', 'json']);
    expect(replace.code, replace.stderr).toBe(0);
    const replaced = await client.get(T.gns, undefined, 'blocked-ranges');
    expect(replaced.spec.nets).toEqual(['198.51.100.0/24']);
    expect(replaced.metadata.uid).not.toBe(uidBefore);

    // --prune: never by default; listed in the preview; deletes only in-scope objects the bundle lacks.
    await client.create(T.gnp, c('GlobalNetworkPolicy', 'default.rst-extra', { selector: 'all()', types: ['Ingress'] }));
    const noPrune = await runCli(['restore', bundle, '--resources', '--dry-run', '-o', 'json']);
    expect(JSON.parse(noPrune.stdout).actions.filter((a: any) => a.action === 'prune')).toEqual([]);
    const dryPrune = await runCli(['restore', bundle, '--resources', '--dry-run', '--prune', '-o', 'json']);
    expect(dryPrune.code, dryPrune.stderr).toBe(0);
    // Only the prunes are judged: the operator reinstalled above may still be rewriting what it renders (seen: its
    // ConfigMap calico-system/active-operator shows as an update for a while), which --prune does not change.
    expect(
      JSON.parse(dryPrune.stdout)
        .actions.filter((a: any) => a.action === 'prune')
        .map((a: any) => `${a.action} ${a.id}`),
    ).toEqual(['prune GlobalNetworkPolicy default.rst-extra']);
    expect(await client.getOrUndefined(T.gnp, undefined, 'default.rst-extra')).toBeDefined();
    const pruned = await runCli(['restore', bundle, '--resources', '--yes', '--prune']);
    expect(pruned.code, pruned.stderr).toBe(0);
    expect(await client.getOrUndefined(T.gnp, undefined, 'default.rst-extra')).toBeUndefined();
    await client.delete(T.gns, undefined, 'owned-by-installation');
    await client.delete(T.gns, undefined, 'owned-by-namespace');
  });
});
