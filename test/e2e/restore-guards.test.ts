/**
 * restore --resources on the real control plane, what keeps it safe:
 * - operator replicas and ClusterInformation datastoreReady back to their prior values after a failed restore;
 * - the datastore lock taken before the pools and released to true when it was unset;
 * - a bundle from another cluster refused unless --allow-other-cluster.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import { runCli } from './helpers.js';
import { T, c, datastoreReady, exportTo, operatorReplicas, restoreSuite } from './restore-support.js';

describe('restore --resources guards on a real cluster', () => {
  let client: KubeClient;
  const work = restoreSuite((c) => (client = c));

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
    await client.apply(
      { ...vap, plural: 'validatingadmissionpolicies', kind: 'ValidatingAdmissionPolicy' },
      {
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingAdmissionPolicy',
        metadata: { name: 'rst-deny-one-policy' },
        spec: {
          failurePolicy: 'Fail',
          matchConstraints: {
            resourceRules: [
              { apiGroups: ['crd.projectcalico.org'], apiVersions: ['*'], operations: ['CREATE', 'UPDATE'], resources: ['globalnetworkpolicies'] },
            ],
          },
          validations: [{ expression: "object.metadata.name != 'default.deny-blocked'", message: 'denied by rst-deny-one-policy (e2e)' }],
        },
      },
    );
    await client.apply(
      { ...vap, plural: 'validatingadmissionpolicybindings', kind: 'ValidatingAdmissionPolicyBinding' },
      {
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingAdmissionPolicyBinding',
        metadata: { name: 'rst-deny-one-policy' },
        spec: { policyName: 'rst-deny-one-policy', validationActions: ['Deny'] },
      },
    );
    try {
      // The binding takes effect asynchronously: wait until a dry-run create is denied.
      await client.waitFor(
        'the admission policy to be active',
        async () => {
          try {
            await client.create(T.gnp, c('GlobalNetworkPolicy', 'default.deny-blocked', { selector: 'all()' }), { dryRun: true });
            return undefined;
          } catch (err) {
            return /rst-deny-one-policy/.test((err as Error).message) ? true : undefined;
          }
        },
        { timeoutMs: 60_000 },
      );

      const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json']);
      expect(r.code, r.stderr).toBe(3);
      const result = JSON.parse(r.stdout);
      expect(result.ok).toBe(false);
      expect(result.failures).toEqual([
        expect.objectContaining({ id: 'GlobalNetworkPolicy default.deny-blocked', reason: expect.stringContaining('rst-deny-one-policy') }),
      ]);
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
    await client.waitFor(
      'the admission policy to be gone',
      async () => {
        try {
          await client.create(T.gnp, c('GlobalNetworkPolicy', 'default.deny-blocked', { selector: 'all()' }), { dryRun: true });
          return true;
        } catch {
          return undefined;
        }
      },
      { timeoutMs: 60_000 },
    );
    const ok = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json']);
    expect(ok.code, ok.stderr).toBe(0);
    expect(
      JSON.parse(ok.stdout)
        .actions.filter((a: any) => a.outcome === 'done')
        .map((a: any) => a.id),
    ).toEqual(['GlobalNetworkPolicy default.deny-blocked']);
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
    for (const args of [
      ['restore', path.join(work, 'no-such-bundle'), '--resources'],
      ['restore', bundle],
      ['restore', bundle, '--resources', '--disks'],
    ]) {
      const bad = await runCli(args);
      expect(bad.code, `${args.join(' ')}: ${bad.stderr}`).toBe(2);
      expect(bad.stderr).toMatch(/^cni-rewind: /);
      expect(bad.stderr).not.toMatch(/\n\s+at /);
    }
  });
});
