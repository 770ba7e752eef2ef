/**
 * restore --resources on the real control plane:
 * - the incident: export, delete every Calico CRD, restore --yes: everything back with the same spec, diff exits 0;
 * - export, edit and delete a few objects: --dry-run lists exactly those and writes nothing; the real run fixes exactly those;
 * - operator replicas and ClusterInformation datastoreReady back to their prior values after a successful and a failed restore;
 * - a 3.28.1 bundle onto 3.27.4 CRDs: the Installation fields 3.27 does not know are reported; --drop-unknown-fields succeeds.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject, ResourceType } from '../../src/kube/types.js';
import { applyFixture, calicoType, operatorType, resetCalico, runCli, testClient } from './helpers.js';

const T = {
  ippool: calicoType('ippools', 'IPPool'),
  ipreservation: calicoType('ipreservations', 'IPReservation'),
  ipamconfig: calicoType('ipamconfigs', 'IPAMConfig'),
  blockaffinity: calicoType('blockaffinities', 'BlockAffinity'),
  ipamblock: calicoType('ipamblocks', 'IPAMBlock'),
  ipamhandle: calicoType('ipamhandles', 'IPAMHandle'),
  felix: calicoType('felixconfigurations', 'FelixConfiguration'),
  bgpconfig: calicoType('bgpconfigurations', 'BGPConfiguration'),
  bgppeer: calicoType('bgppeers', 'BGPPeer'),
  gnp: calicoType('globalnetworkpolicies', 'GlobalNetworkPolicy'),
  np: calicoType('networkpolicies', 'NetworkPolicy', true),
  gns: calicoType('globalnetworksets', 'GlobalNetworkSet'),
  ns: calicoType('networksets', 'NetworkSet', true),
  hep: calicoType('hostendpoints', 'HostEndpoint'),
  clusterinfo: calicoType('clusterinformations', 'ClusterInformation'),
  installation: operatorType('installations', 'Installation'),
};
const APP_NS = 'rst-app';
const c = (kind: string, name: string, spec: unknown, ns?: string): KubeObject => ({
  apiVersion: 'crd.projectcalico.org/v1',
  kind,
  metadata: { name, ...(ns ? { namespace: ns } : {}) },
  spec,
});

/** A small but complete Calico datastore: pools (one disabled, not operator-managed), IPAM, BGP/Felix, sets, policies. */
function population(): [ResourceType, KubeObject][] {
  return [
    [T.ippool, c('IPPool', 'default-ipv4-ippool', { cidr: '192.168.0.0/16', blockSize: 26, vxlanMode: 'CrossSubnet', ipipMode: 'Never', natOutgoing: true, nodeSelector: 'all()', allowedUses: ['Workload', 'Tunnel'] })],
    [T.ippool, c('IPPool', 'legacy-pool', { cidr: '10.200.0.0/16', blockSize: 26, vxlanMode: 'Never', ipipMode: 'Always', natOutgoing: true, disabled: true, nodeSelector: 'all()' })],
    [T.ipreservation, c('IPReservation', 'reserved', { reservedCIDRs: ['192.168.255.0/24'] })],
    [T.ipamconfig, c('IPAMConfig', 'default', { strictAffinity: false, autoAllocateBlocks: true, maxBlocksPerHost: 0 })],
    [T.blockaffinity, c('BlockAffinity', 'rst-node-1-192-168-10-0-26', { cidr: '192.168.10.0/26', node: 'rst-node-1', state: 'confirmed', deleted: 'false' })],
    [
      T.ipamblock,
      c('IPAMBlock', '192-168-10-0-26', {
        cidr: '192.168.10.0/26',
        affinity: 'host:rst-node-1',
        strictAffinity: false,
        allocations: [0, 1, ...Array.from({ length: 62 }, () => null)],
        unallocated: Array.from({ length: 62 }, (_, i) => i + 2),
        attributes: [
          { handle_id: 'vxlan-tunnel-addr-rst-node-1', secondary: { node: 'rst-node-1', type: 'vxlanTunnelAddress' } },
          { handle_id: 'k8s-pod-network.abc123', secondary: { namespace: APP_NS, node: 'rst-node-1', pod: 'web-0', timestamp: '2026-01-01 00:00:00 +0000 UTC' } },
        ],
        deleted: false,
        sequenceNumber: 7,
        sequenceNumberForAllocation: { '0': 1, '1': 2 },
      }),
    ],
    [T.ipamhandle, c('IPAMHandle', 'k8s-pod-network.abc123', { handleID: 'k8s-pod-network.abc123', block: { '192.168.10.0/26': 1 }, deleted: false })],
    [T.ipamhandle, c('IPAMHandle', 'vxlan-tunnel-addr-rst-node-1', { handleID: 'vxlan-tunnel-addr-rst-node-1', block: { '192.168.10.0/26': 1 }, deleted: false })],
    [T.felix, c('FelixConfiguration', 'default', { bpfEnabled: false, logSeverityScreen: 'Info', reportingInterval: '0s', vxlanVNI: 4096 })],
    [T.bgpconfig, c('BGPConfiguration', 'default', { asNumber: 64512, nodeToNodeMeshEnabled: false, logSeverityScreen: 'Info' })],
    [T.bgppeer, c('BGPPeer', 'tor-router', { peerIP: '10.0.0.1', asNumber: 64500 })],
    [T.gns, c('GlobalNetworkSet', 'blocked-ranges', { nets: ['198.51.100.0/24'] })],
    [T.ns, c('NetworkSet', 'partners', { nets: ['203.0.113.0/24'] }, APP_NS)],
    [T.hep, c('HostEndpoint', 'rst-node-1-eth0', { node: 'rst-node-1', interfaceName: 'eth0', expectedIPs: ['10.0.0.11'] })],
    [T.gnp, c('GlobalNetworkPolicy', 'default.deny-blocked', { order: 10, selector: 'all()', types: ['Egress'], egress: [{ action: 'Deny', destination: { selector: 'has(blocked)' } }] })],
    [T.gnp, c('GlobalNetworkPolicy', 'default.allow-dns', { order: 100, selector: 'all()', types: ['Egress'], egress: [{ action: 'Allow', protocol: 'UDP', destination: { ports: [53] } }] })],
    [T.np, c('NetworkPolicy', 'default.web', { selector: "app == 'web'", types: ['Ingress'], ingress: [{ action: 'Allow', protocol: 'TCP', destination: { ports: [80, 443] } }] }, APP_NS)],
  ];
}

const id = (t: ResourceType, o: KubeObject) => `${t.kind} ${o.metadata.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata.name}`;

async function populate(client: KubeClient): Promise<void> {
  await client.apply(K.namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: APP_NS } }, { fieldManager: 'rst-e2e' });
  for (const [t, o] of population()) await client.apply(t, o, { fieldManager: 'rst-e2e' });
  // What calico-node/the operator leave in ClusterInformation.
  await client.apply(T.clusterinfo, c('ClusterInformation', 'default', { calicoVersion: 'v3.28.1', clusterGUID: 'f0e1d2c3', clusterType: 'typha,kdd,k8s,operator,bgp', datastoreReady: true }), { fieldManager: 'rst-e2e' });
}

async function specs(client: KubeClient): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const t of [...new Set(population().map(([t]) => t)), T.clusterinfo, T.installation]) {
    for (const o of await client.listAll(t)) out[id(t, o)] = o.spec;
  }
  return out;
}

async function resourceVersions(client: KubeClient): Promise<Record<string, string | undefined>> {
  const out: Record<string, string | undefined> = {};
  for (const t of [...new Set(population().map(([t]) => t)), T.clusterinfo, T.installation]) {
    for (const o of await client.listAll(t)) out[id(t, o)] = o.metadata.resourceVersion;
  }
  return out;
}

async function operatorReplicas(client: KubeClient): Promise<number | undefined> {
  return (await client.get(K.deployment, 'tigera-operator', 'tigera-operator')).spec?.replicas;
}
async function datastoreReady(client: KubeClient): Promise<unknown> {
  return (await client.getOrUndefined(T.clusterinfo, undefined, 'default'))?.spec?.datastoreReady;
}

/** Delete every Calico CRD, as `kubectl delete -f tigera-operator.yaml` does (the incident), and wait until they are gone. */
async function deleteCalicoCrds(client: KubeClient): Promise<void> {
  const crds = (await client.listAll(K.crd)).filter((x) => ['crd.projectcalico.org', 'operator.tigera.io'].includes(x.spec.group));
  for (const x of crds) await client.delete(K.crd, undefined, x.metadata.name);
  await client.waitFor('Calico CRDs to be gone', async () => ((await client.listAll(K.crd)).some((x) => ['crd.projectcalico.org', 'operator.tigera.io'].includes(x.spec.group)) ? undefined : true), { timeoutMs: 120_000 });
}

async function exportTo(dir: string, name: string): Promise<string> {
  const out = path.join(dir, name);
  const r = await runCli(['export', '--out', out]);
  expect(r.code, r.stderr).toBe(0);
  return out;
}

describe('restore --resources on a real cluster', () => {
  let client: KubeClient;
  const work = mkdtempSync(path.join(os.tmpdir(), 'cnr-restore-'));

  beforeAll(async () => {
    client = await testClient();
    await resetCalico(client);
    await client.delete(K.namespace, undefined, APP_NS);
    await applyFixture(client, '3.28.1', 'tigera-operator.yaml');
    await applyFixture(client, '3.28.1', 'custom-resources.yaml');
    // The 3.28 operator writes name/allowedUses into the Installation pool entries itself (docs/calico-differences.md); kwok
    // runs no real operator, so do what it would.
    const inst = await client.get(T.installation, undefined, 'default');
    inst.spec.calicoNetwork.ipPools[0].allowedUses = ['Workload', 'Tunnel'];
    await client.replace(T.installation, inst);
    await populate(client);
  });
  afterAll(async () => {
    client.close();
  });

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
    for (const phase of ['readBundle', 'readCluster', 'createCrds', 'guards', 'write', 'driftCheck', 'total']) expect(result.timings[phase], phase).toBeGreaterThanOrEqual(0);
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
    const changes = plan.actions.filter((a: any) => a.action !== 'unchanged').map((a: any) => `${a.action} ${a.id}`).sort();
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
    expect(result.actions.filter((a: any) => a.outcome === 'done').map((a: any) => a.id).sort()).toEqual([
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

  it('puts the operator replicas and datastoreReady back after a failed restore, and reports each failure', async () => {
    const bundle = await exportTo(work, 'failing');
    // Prior values that differ from the defaults, so "put back" is visible.
    await client.mergePatch(K.deployment, 'tigera-operator', 'tigera-operator', { spec: { replicas: 2 } });
    await client.mergePatch(T.clusterinfo, undefined, 'default', { spec: { datastoreReady: false } });
    await client.delete(T.ipamblock, undefined, '192-168-10-0-26');
    await client.delete(T.gnp, undefined, 'default.deny-blocked');
    await client.delete(T.gnp, undefined, 'default.allow-dns');
    // A real admission policy makes the API server refuse one of the writes (after IPAM, under the lock).
    const vap = { group: 'admissionregistration.k8s.io', version: 'v1', namespaced: false };
    await client.apply({ ...vap, plural: 'validatingadmissionpolicies', kind: 'ValidatingAdmissionPolicy' }, {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name: 'rst-deny-one-policy' },
      spec: {
        failurePolicy: 'Fail',
        matchConstraints: { resourceRules: [{ apiGroups: ['crd.projectcalico.org'], apiVersions: ['*'], operations: ['CREATE', 'UPDATE'], resources: ['globalnetworkpolicies'] }] },
        validations: [{ expression: "object.metadata.name != 'default.deny-blocked'", message: 'denied by rst-deny-one-policy (e2e)' }],
      },
    });
    await client.apply({ ...vap, plural: 'validatingadmissionpolicybindings', kind: 'ValidatingAdmissionPolicyBinding' }, {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name: 'rst-deny-one-policy' },
      spec: { policyName: 'rst-deny-one-policy', validationActions: ['Deny'] },
    });
    try {
      // The binding takes effect asynchronously: wait until a dry-run create is denied.
      await client.waitFor('the admission policy to be active', async () => {
        try {
          await client.create(T.gnp, c('GlobalNetworkPolicy', 'default.deny-blocked', { selector: 'all()' }), { dryRun: true });
          return undefined;
        } catch (err) {
          return /rst-deny-one-policy/.test((err as Error).message) ? true : undefined;
        }
      }, { timeoutMs: 60_000 });

      const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json']);
      expect(r.code, r.stderr).toBe(3);
      const result = JSON.parse(r.stdout);
      expect(result.ok).toBe(false);
      expect(result.failures).toEqual([expect.objectContaining({ id: 'GlobalNetworkPolicy default.deny-blocked', reason: expect.stringContaining('rst-deny-one-policy') })]);
      // The rest was restored.
      expect(await client.getOrUndefined(T.ipamblock, undefined, '192-168-10-0-26')).toBeDefined();
      expect(await client.getOrUndefined(T.gnp, undefined, 'default.allow-dns')).toBeDefined();
      expect(r.stderr).toMatch(/paused the tigera operator \(replicas 2 -> 0\)/);
      expect(r.stderr).toMatch(/datastoreReady=false while pools and IPAM are written/);
      expect(await operatorReplicas(client)).toBe(2);
      expect(await datastoreReady(client)).toBe(false);
      const dep = await client.get(K.deployment, 'tigera-operator', 'tigera-operator');
      expect(dep.metadata.annotations?.['cni-rewind.io/restore-prior-replicas']).toBeUndefined();

      const table = await runCli(['restore', bundle, '--resources', '--yes']);
      expect(table.code).toBe(3);
      expect(table.stdout).toMatch(/1 object\(s\) not restored:[\s\S]*GlobalNetworkPolicy default.deny-blocked/);
    } finally {
      await client.delete({ ...vap, plural: 'validatingadmissionpolicybindings', kind: 'ValidatingAdmissionPolicyBinding' }, undefined, 'rst-deny-one-policy');
      await client.delete({ ...vap, plural: 'validatingadmissionpolicies', kind: 'ValidatingAdmissionPolicy' }, undefined, 'rst-deny-one-policy');
    }
    // And a successful restore also leaves the prior values (2 and false) in place.
    await client.waitFor('the admission policy to be gone', async () => {
      try {
        await client.create(T.gnp, c('GlobalNetworkPolicy', 'default.deny-blocked', { selector: 'all()' }), { dryRun: true });
        return true;
      } catch {
        return undefined;
      }
    }, { timeoutMs: 60_000 });
    const ok = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json']);
    expect(ok.code, ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout).actions.filter((a: any) => a.outcome === 'done').map((a: any) => a.id)).toEqual(['GlobalNetworkPolicy default.deny-blocked']);
    expect(await operatorReplicas(client)).toBe(2);
    expect(await datastoreReady(client)).toBe(false);
    await client.mergePatch(K.deployment, 'tigera-operator', 'tigera-operator', { spec: { replicas: 1 } });
    await client.mergePatch(T.clusterinfo, undefined, 'default', { spec: { datastoreReady: true } });
  });

  it('takes the datastore lock before the pools, and releases a lock whose prior value was unset to true', async () => {
    const bundle = await exportTo(work, 'lock');
    // calico-node always writes datastoreReady; unset is what a hand-made or damaged ClusterInformation has. Calico's
    // CNI plugin dereferences the field without a nil check, so the restore must leave it true, never unset.
    await client.mergePatch(T.clusterinfo, undefined, 'default', { spec: { datastoreReady: null } });
    expect(await datastoreReady(client)).toBeUndefined();
    await client.delete(T.ippool, undefined, 'legacy-pool');
    await client.delete(T.ipamblock, undefined, '192-168-10-0-26');
    const r = await runCli(['restore', bundle, '--resources', '--yes']);
    expect(r.code, r.stderr).toBe(0);
    expect(await datastoreReady(client)).toBe(true);
    const lockedAt = r.stderr.indexOf('datastoreReady=false while pools and IPAM are written');
    const poolsAt = r.stderr.indexOf('restoring IP pools and reservations');
    expect(lockedAt, r.stderr).toBeGreaterThanOrEqual(0);
    expect(poolsAt, r.stderr).toBeGreaterThan(lockedAt);
    // One lock for both phases: locked and released once.
    expect(r.stderr.match(/datastoreReady=false while/g)).toHaveLength(1);
  });

  it('refuses a bundle from another cluster unless --allow-other-cluster', async () => {
    const bundle = await exportTo(work, 'other');
    const { readFileSync, writeFileSync } = await import('node:fs');
    const mf = path.join(bundle, 'manifest.json');
    const m = JSON.parse(readFileSync(mf, 'utf8'));
    m.cluster.uid = '00000000-0000-0000-0000-000000000000';
    writeFileSync(mf, JSON.stringify(m, null, 2));
    const r = await runCli(['restore', bundle, '--resources', '--dry-run']);
    expect(r.code).toBe(5);
    expect(r.stderr).toMatch(/not from this cluster/);
    expect(r.stderr).toMatch(/--allow-other-cluster/);
    const ok = await runCli(['restore', bundle, '--resources', '--dry-run', '--allow-other-cluster', '-o', 'json']);
    expect(ok.code, ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout).cluster.sameCluster).toBe(false);
    // Bad input: one clear line, exit 2, no stack trace.
    for (const args of [['restore', path.join(work, 'no-such-bundle'), '--resources'], ['restore', bundle], ['restore', bundle, '--resources', '--disks']]) {
      const bad = await runCli(args);
      expect(bad.code, `${args.join(' ')}: ${bad.stderr}`).toBe(2);
      expect(bad.stderr).toMatch(/^cni-rewind: /);
      expect(bad.stderr).not.toMatch(/\n\s+at /);
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
    await client.create(T.gns, owned('owned-by-installation', { apiVersion: 'operator.tigera.io/v1', kind: 'Installation', name: 'default', uid: inst.metadata.uid! }));
    await client.create(T.gns, owned('owned-by-namespace', { apiVersion: 'v1', kind: 'Namespace', name: 'rst-owner', uid: ownerNs.metadata.uid! }));
    const bundle = await exportTo(work, 'owners');

    // Owners go away; the garbage collector (real kube-controller-manager) deletes what they owned.
    await client.delete(T.installation, undefined, 'default');
    await client.delete(K.namespace, undefined, 'rst-owner');
    await client.waitFor('the owned sets to be garbage-collected', async () =>
      (await client.getOrUndefined(T.gns, undefined, 'owned-by-installation')) || (await client.getOrUndefined(T.gns, undefined, 'owned-by-namespace')) ? undefined : true,
    { timeoutMs: 120_000 });

    const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/GlobalNetworkSet owned-by-namespace: ownerReferences to Namespace rst-owner dropped: the owner is neither in the cluster nor in the bundle/);
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
    expect(JSON.parse(skip.stdout).actions.find((a: any) => a.id === 'GlobalNetworkSet blocked-ranges')).toMatchObject({ action: 'skip', reason: expect.stringContaining('--existing skip') });
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
    expect(JSON.parse(dryPrune.stdout).actions.filter((a: any) => a.action !== 'unchanged').map((a: any) => `${a.action} ${a.id}`)).toEqual(['prune GlobalNetworkPolicy default.rst-extra']);
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
