/**
 * restore --resources on the real control plane, what comes back:
 * - the incident: export, delete every Calico CRD, restore --yes: everything back with the same spec, diff exits 0;
 * - export, edit and delete a few objects: --dry-run lists exactly those and writes nothing; the real run fixes exactly those;
 * - owner references re-linked or dropped; --existing skip|replace; --prune;
 * - a 3.28.1 bundle onto 3.27.4 CRDs: the Installation fields 3.27 does not know are reported; --drop-unknown-fields succeeds;
 * - a disabled operator-managed pool under operator v1.34 is refused with the fix.
 * The guards (operator, datastore lock, other cluster) are in restore-guards.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject } from '../../src/kube/types.js';
import { applyFixture, runCli } from './helpers.js';
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

describe('restore --resources on a real cluster', () => {
  let client: KubeClient;
  const work = restoreSuite((c) => (client = c));

  it('brings everything back after every Calico CRD was deleted (the incident), and diff then exits 0', async () => {
    const before = await specs(client);
    expect(Object.keys(before).length).toBeGreaterThanOrEqual(population().length + 2);
    const replicas = await operatorReplicas(client);
    const bundle = await exportTo(work, 'incident');

    await deleteCalicoCrds(client);
    expect(await client.getOrUndefined(K.crd, undefined, 'ippools.crd.projectcalico.org')).toBeUndefined();

    const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json']);
    expect(r.code, r.stderr + r.stdout.slice(0, 4000)).toBe(0);
    const result = JSON.parse(r.stdout);
    expect(result.ok).toBe(true);
    expect(result.crdsToCreate).toContain('ippools.crd.projectcalico.org');
    expect(result.crdsToCreate).toContain('installations.operator.tigera.io');
    expect(result.failures).toEqual([]);
    // The default pool is an Installation entry of operator v1.34: said so.
    const pool = result.actions.find((a: any) => a.id === 'IPPool default-ipv4-ippool');
    expect(pool.notes.join(' ')).toMatch(/restored through Installation entry default-ipv4-ippool/);
    // Order: pools before IPAM before policies.
    const order = result.actions.filter((a: any) => a.outcome === 'done').map((a: any) => a.phase);
    expect(order.indexOf('ip-pools')).toBeLessThan(order.indexOf('ipam'));
    expect(order.indexOf('ipam')).toBeLessThan(order.indexOf('policies'));
    // Where the time went, per phase, for -o json users (and bench/restore.ts).
    for (const phase of ['readBundle', 'readCluster', 'createCrds', 'guards', 'write', 'driftCheck', 'total'])
      expect(result.timings[phase], phase).toBeGreaterThanOrEqual(0);
    expect(result.timings.total).toBeGreaterThanOrEqual(result.timings.write);

    expect(await specs(client)).toEqual(before);
    expect(await operatorReplicas(client)).toBe(replicas);
    expect(await datastoreReady(client)).toBe(true);

    const d = await runCli(['diff', bundle]);
    expect(d.code, d.stdout + d.stderr).toBe(0);
  });

  it('--dry-run lists exactly the edited and deleted objects and writes nothing; the real run fixes exactly those', async () => {
    const bundle = await exportTo(work, 'edits');
    const before = await specs(client);
    // Edit two objects, delete two.
    await client.mergePatch(T.gnp, undefined, 'default.allow-dns', { spec: { order: 999 } });
    await client.mergePatch(T.felix, undefined, 'default', { spec: { logSeverityScreen: 'Debug' } });
    await client.delete(T.ipamhandle, undefined, 'k8s-pod-network.abc123');
    await client.delete(T.np, APP_NS, 'default.web');
    const rvBefore = await resourceVersions(client);

    const dry = await runCli(['restore', bundle, '--resources', '--dry-run', '-o', 'json']);
    expect(dry.code, dry.stderr).toBe(0);
    const plan = JSON.parse(dry.stdout);
    const changes = plan.actions
      .filter((a: any) => a.action !== 'unchanged')
      .map((a: any) => `${a.action} ${a.id}`)
      .sort();
    expect(changes).toEqual([
      'create IPAMHandle k8s-pod-network.abc123',
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
    ).toEqual([
      'FelixConfiguration default',
      'GlobalNetworkPolicy default.allow-dns',
      'IPAMHandle k8s-pod-network.abc123',
      `NetworkPolicy ${APP_NS}/default.web`,
    ]);
    expect(await specs(client)).toEqual(before);
    // Nothing else was touched.
    const rvAfter = await resourceVersions(client);
    for (const [k, v] of Object.entries(rvBefore)) {
      if (!['FelixConfiguration default', 'GlobalNetworkPolicy default.allow-dns', 'ClusterInformation default'].includes(k)) expect(rvAfter[k], k).toBe(v);
    }
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

    // Owners go away; the garbage collector (real kube-controller-manager) deletes what they owned.
    await client.delete(T.installation, undefined, 'default');
    await client.delete(K.namespace, undefined, 'rst-owner');
    await client.waitFor(
      'the owned sets to be garbage-collected',
      async () =>
        (await client.getOrUndefined(T.gns, undefined, 'owned-by-installation')) || (await client.getOrUndefined(T.gns, undefined, 'owned-by-namespace'))
          ? undefined
          : true,
      { timeoutMs: 120_000 },
    );

    const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json']);
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
    expect(
      JSON.parse(dryPrune.stdout)
        .actions.filter((a: any) => a.action !== 'unchanged')
        .map((a: any) => `${a.action} ${a.id}`),
    ).toEqual(['prune GlobalNetworkPolicy default.rst-extra']);
    expect(await client.getOrUndefined(T.gnp, undefined, 'default.rst-extra')).toBeDefined();
    const pruned = await runCli(['restore', bundle, '--resources', '--yes', '--prune']);
    expect(pruned.code, pruned.stderr).toBe(0);
    expect(await client.getOrUndefined(T.gnp, undefined, 'default.rst-extra')).toBeUndefined();
    await client.delete(T.gns, undefined, 'owned-by-installation');
    await client.delete(T.gns, undefined, 'owned-by-namespace');
  });

  it('a 3.28.1 bundle onto 3.27.4 CRDs: reports the Installation fields 3.27 does not know; --drop-unknown-fields succeeds', async () => {
    const bundle = await exportTo(work, 'v3281');
    // Downgrade the CRDs the incident way (delete), then install 3.27.4's operator manifests.
    await deleteCalicoCrds(client);
    await applyFixture(client, '3.27.4', 'tigera-operator.yaml');
    const replicas = await operatorReplicas(client);

    const dry = await runCli(['restore', bundle, '--resources', '--dry-run', '-o', 'json']);
    expect(dry.code, dry.stderr).toBe(1);
    const plan = JSON.parse(dry.stdout);
    const inst = plan.actions.find((a: any) => a.id === 'Installation default');
    expect(inst.action).toBe('blocked');
    expect(inst.findings.map((f: any) => `${f.kind} ${f.path}`).sort()).toEqual([
      'pruned spec.calicoNetwork.ipPools[0].allowedUses',
      'pruned spec.calicoNetwork.ipPools[0].name',
    ]);
    expect(inst.fix).toMatch(/--drop-unknown-fields/);
    // Operator v1.32 does not manage pools: the disabled pool is written as it is, nothing refused.
    expect(plan.actions.filter((a: any) => a.action === 'refused')).toEqual([]);

    const blocked = await runCli(['restore', bundle, '--resources', '--yes']);
    expect(blocked.code).toBe(3);
    expect(blocked.stdout).toMatch(/Installation default\s+blocked\s+.*does not know .*spec\.calicoNetwork\.ipPools\[0\]\.name/);
    expect(await client.getOrUndefined(T.installation, undefined, 'default')).toBeUndefined();

    const r = await runCli(['restore', bundle, '--resources', '--yes', '--drop-unknown-fields', '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout);
    expect(result.ok).toBe(true);
    const live = await client.get(T.installation, undefined, 'default');
    expect(live.spec.calicoNetwork.ipPools[0]).toMatchObject({ cidr: '192.168.0.0/16', encapsulation: 'VXLANCrossSubnet' });
    expect(live.spec.calicoNetwork.ipPools[0].name).toBeUndefined();
    expect((await client.get(T.ippool, undefined, 'legacy-pool')).spec.disabled).toBe(true);
    expect(await operatorReplicas(client)).toBe(replicas);
  });

  it('refuses a disabled operator-managed pool under operator v1.34, with the fix', async () => {
    // Back to 3.28.1; label the disabled pool as the v1.34 operator does when it adopts a pool.
    await applyFixture(client, '3.28.1', 'tigera-operator.yaml');
    await client.mergePatch(T.ippool, undefined, 'legacy-pool', { metadata: { labels: { 'app.kubernetes.io/managed-by': 'tigera-operator' } } });
    const bundle = await exportTo(work, 'managed');
    await client.delete(T.ippool, undefined, 'legacy-pool');
    const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json']);
    expect(r.code, r.stderr).toBe(3);
    const result = JSON.parse(r.stdout);
    const pool = result.actions.find((a: any) => a.id === 'IPPool legacy-pool');
    expect(pool.action).toBe('refused');
    expect(pool.reason).toMatch(/has no "disabled" field/);
    expect(pool.fix).toMatch(/nodeSelector: "!all\(\)"/);
    expect(await client.getOrUndefined(T.ippool, undefined, 'legacy-pool')).toBeUndefined();
  });
});
