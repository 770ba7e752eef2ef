/**
 * Calico issue #9100 reproduced with the real programs (no faked operator): Calico 3.27.4 installed through the
 * real tigera operator v1.32.10 with `default-ipv4-ippool` disabled and still listed in the Installation; the
 * upgrade to 3.28.1 (its tigera-operator.yaml applied, so the operator Deployment's image changes and the
 * supervisor runs the v1.34.3 binary); the real v1.34 operator rewrites the pool to enabled through the
 * projectcalico.org/v3 API (served by the real Calico API server behind the aggregation layer), and disabling
 * it again does not stick.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import type { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { applyFixture, calicoType } from './helpers.js';
import { installIncident327, ippoolsWide, kubectl, waitOperator, withRealCalico } from './calico-support.js';

const POOL = calicoType('ippools', 'IPPool');

describe('calico#9100 with the real tigera operator and Calico API server', () => {
  const real = withRealCalico('c9100');
  let client: KubeClient;
  let cluster: LocalCluster;
  beforeAll(() => {
    client = real.client();
    cluster = real.cluster;
  });

  it('3.27.4 keeps the disabled pool; after the upgrade to 3.28.1 the v1.34 operator re-enables it and a patch back does not stick', async () => {
    // Calico 3.27.4 as its docs install it, the pool migration done (default-ipv4-ippool disabled, still listed).
    await installIncident327(client, cluster);

    // v1.32 leaves a pool alone once it exists: still disabled after several of its reconciles.
    await new Promise((r) => setTimeout(r, 10_000));
    expect((await ippoolsWide())['default-ipv4-ippool']?.DISABLED).toBe('true');
    const before = await client.get(POOL, undefined, 'default-ipv4-ippool');
    expect(before.spec.disabled).toBe(true);
    expect(before.metadata.annotations?.['projectcalico.org/metadata'] ?? '').not.toContain('managed-by');

    // The upgrade: 3.28.1's tigera-operator.yaml changes the operator image; the supervisor switches binaries.
    await applyFixture(client, '3.28.1', 'tigera-operator.yaml');
    const st = await waitOperator(cluster, 'v1.34.3');
    expect(st.operator?.tag).toBe('v1.34.3');
    const switchedAt = Date.now();

    // The real v1.34 operator adopts the pool (it equals the Installation entry) and rewrites it through v3.
    const rewritten = await client.waitFor(
      'the v1.34 operator to rewrite default-ipv4-ippool',
      async () => {
        const p = await client.get(POOL, undefined, 'default-ipv4-ippool');
        return p.spec.disabled ? undefined : p;
      },
      { timeoutMs: 300_000, intervalMs: 200 },
    );
    console.log(`the v1.34 operator rewrote the pool ${Date.now() - switchedAt} ms after it started`);
    const meta = JSON.parse(rewritten.metadata.annotations?.['projectcalico.org/metadata'] ?? '{}');
    // Through projectcalico.org/v3, stored as the API server serving then stores v3 labels: 3.28.1's libcalico-go in
    // that annotation (none on the object), 3.27.4's on the object (its annotation never holds labels,
    // resources.go ConvertCalicoResourceToK8sResource); the operator switches first, so either may serve its write.
    const storedBy = meta.labels ? 'v3.28.1' : 'v3.27.4';
    console.log(`the rewrite was stored by the ${storedBy} API server`);
    if (storedBy === 'v3.28.1') {
      expect(meta.labels['app.kubernetes.io/managed-by']).toBe('tigera-operator');
      expect(rewritten.metadata.labels?.['app.kubernetes.io/managed-by']).toBeUndefined();
    } else expect(rewritten.metadata.labels?.['app.kubernetes.io/managed-by']).toBe('tigera-operator');
    const v3 = await client.request<any>('GET', '/apis/projectcalico.org/v3/ippools/default-ipv4-ippool');
    expect(v3.metadata.labels?.['app.kubernetes.io/managed-by']).toBe('tigera-operator');
    expect(v3.spec.disabled ?? false).toBe(false);
    expect((await ippoolsWide())['default-ipv4-ippool']?.DISABLED).toBe('false');

    // The user disables it again, as in the issue: accepted by the API server, undone by the operator.
    const patchedAt = Date.now();
    const out = await kubectl(cluster, ['patch', 'ippools.crd.projectcalico.org', 'default-ipv4-ippool', '--type=merge', '-p', '{"spec":{"disabled":true}}']);
    expect(out.trim()).toBe('ippool.crd.projectcalico.org/default-ipv4-ippool patched');
    await client.waitFor(
      'the operator to undo the patch',
      async () => ((await client.get(POOL, undefined, 'default-ipv4-ippool')).spec.disabled ? undefined : true),
      { timeoutMs: 60_000, intervalMs: 20 },
    );
    console.log(`the patch back to disabled was undone ${Date.now() - patchedAt} ms after kubectl patch started`);
    await new Promise((r) => setTimeout(r, 5_000));
    const wide = await ippoolsWide();
    expect(wide['default-ipv4-ippool']?.DISABLED).toBe('false');
    expect(wide['new-ipv4-pool']?.DISABLED).toBe('false');
  }, 900_000);
});
