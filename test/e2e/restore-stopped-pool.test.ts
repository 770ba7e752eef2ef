/**
 * A disabled pool the operator does not own, restored under Calico 3.28.1's real tigera operator v1.34.3 (issue 30).
 * The Installation lists default-ipv4-ippool, but the pool differs from that entry (no managed-by label, natOutgoing
 * off; new pods go to an enabled pool of the user's, which the Installation does not list): pool_controller.go leaves it alone ("Cannot update an IP pool not owned by the operator"), so it stays
 * disabled. Once it is lost, the operator creates it again from the entry, enabled (Calico issue #9100). Restore must
 * consult the adoption model before refusing the pool, write it back disabled, and not leave an Installation entry
 * that would create the stopped pool allocating again.
 */
import { describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject } from '../../src/kube/types.js';
import { calicoctl, nonAllocating } from './calico-support.js';
import { T, exportTo, restoreSuite } from './restore-support.js';
import { STOPPED_POOL as POOL, loseStoppedPool, managedBy, notOwnedCount, releaseStoppedPool, restoreStoppedPool } from './stopped-pool-support.js';

describe('restore of a disabled pool the operator does not own (the real v1.34.3)', () => {
  let client: KubeClient;
  const suite = restoreSuite('rsp', (c) => (client = c));

  it('writes it back disabled, stops its Installation entry the operator way, and it stays disabled through forced reconciles', async () => {
    const cluster = suite.real.cluster;
    // The user's pool: released from the operator, NAT off and disabled, all while the operator is scaled down.
    await releaseStoppedPool(client, cluster, { operatorTag: 'v1.34.3', activePool: 'rsp-active-pool', poolPatch: { disabled: true, natOutgoing: false } });
    expect(managedBy(await client.get(T.ippool, undefined, POOL))).toBeUndefined();
    const bundle = await exportTo(suite.work, 'stopped-pool');

    await loseStoppedPool(client);
    const { r, result } = await restoreStoppedPool(bundle);
    const inst = result.actions.find((a: any) => a.id === 'Installation default');
    expect(inst.notes).toEqual(expect.arrayContaining([expect.stringMatching(/nodeSelector: "!all\(\)".*default-ipv4-ippool/)]));
    expect(r.code, r.stderr).toBe(0);
    const restored = await client.get(T.ippool, undefined, POOL);
    expect(restored.spec.disabled).toBe(true);
    const entry = (await client.get(T.installation, undefined, 'default')).spec.calicoNetwork.ipPools.find((e: any) => e.cidr === restored.spec.cidr);
    expect(entry.nodeSelector).toBe('!all()');

    // Under the resumed operator (started again by the restore, so not watchPoolNonAllocating's fresh one), four
    // reconciles forced by touching the Installation: each seen in the pool controller's own judgement, the pool
    // still disabled after it.
    for (let touch = 1; touch <= 4; touch++) {
      const before = notOwnedCount(cluster);
      await client.mergePatch(T.installation, undefined, 'default', { metadata: { annotations: { 'rsp.example/touch': String(touch) } } });
      await client.waitFor(`the pool controller to reconcile touch ${touch}`, async () => (notOwnedCount(cluster) > before ? true : undefined), {
        timeoutMs: 120_000,
        intervalMs: 250,
      });
      await new Promise((done) => setTimeout(done, 10_000));
      const p = await client.get(T.ippool, undefined, POOL);
      expect(p.spec.disabled, `after forced reconcile ${touch}: ${JSON.stringify(p.spec)}`).toBe(true);
      expect(managedBy(p)).toBeUndefined();
    }

    // Lost again, the entry restore left creates it non-allocating.
    await calicoctl(['delete', 'ippool', POOL]);
    const again: KubeObject = await client.waitFor('the operator to create the pool again', () => client.getOrUndefined(T.ippool, undefined, POOL), {
      timeoutMs: 180_000,
    });
    expect(nonAllocating(again), JSON.stringify(again.spec)).toBe(true);
  }, 1_800_000);
});
