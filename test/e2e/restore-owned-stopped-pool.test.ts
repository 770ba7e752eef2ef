/**
 * A disabled pool the operator owns, restored under Calico 3.28.1's real tigera operator v1.34.3 (issue 30).
 * default-ipv4-ippool is listed in the Installation and marked by the operator as its own; the user disables it with
 * calicoctl and a backup takes it so. The operator's pool type has no `disabled`: from its unchanged entry it
 * rewrites the pool enabled, and once the pool is lost it creates it again, enabled (Calico issue #9100). Restore
 * used to refuse the pool and leave that entry as it was. Now it writes the entry stopped the operator's way
 * (`nodeSelector: "!all()"` on 3.28), says so, and the resumed operator keeps the pool non-allocating.
 * The not-owned case is restore-stopped-pool.test.ts; both share stopped-pool-support.ts.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import { calicoctl, nonAllocating, waitOperator, waitTigeraStatusAvailable, watchPoolNonAllocating } from './calico-support.js';
import { DRIVER_NS, expectDriverPodsIntact, podsForDriverAllocations } from './driver-pods.js';
import { heldByLog, readEvents, startChurn } from './ipam-support.js';
import { expectPodAddressesHeld } from './pod-ip-support.js';
import { T, exportTo, restoreSuite } from './restore-support.js';
import { STOPPED_POOL as POOL, loseStoppedPool, managedBy, notOwnedCount, restoreStoppedPool } from './stopped-pool-support.js';

/** Where new allocations go while default-ipv4-ippool is stopped: the user's pool, which no entry lists. */
const ACTIVE = { name: 'rso-active-pool', cidr: '10.66.0.0/16', prefix: '10.66.' };
const WATCH_MS = 75_000;

describe('restore of a disabled pool the operator owns (the real v1.34.3)', () => {
  let client: KubeClient;
  // The driver's allocations have their Pod objects: their addresses are what must be held after the restore.
  const suite = restoreSuite('rso', (c) => (client = c), { driverPods: true });

  it('stops its Installation entry with nodeSelector "!all()" instead of refusing it; under the resumed operator it allocates nothing', async () => {
    const cluster = suite.real.cluster;
    expect(managedBy(await client.get(T.ippool, undefined, POOL))).toBe('tigera-operator');
    // The user's disable, backed up before the operator's next reconcile could undo it (operator scaled down).
    await client.mergePatch(K.deployment, 'tigera-operator', 'tigera-operator', { spec: { replicas: 0 } });
    await client.waitFor('the operator to stop', async () => (cluster.calicoStatus()?.operator?.pid ? undefined : true), { timeoutMs: 120_000 });
    const active = { cidr: ACTIVE.cidr, blockSize: 26, ipipMode: 'Never', vxlanMode: 'CrossSubnet', natOutgoing: true, nodeSelector: 'all()' };
    await calicoctl(
      ['create', '-f', '-'],
      JSON.stringify({ apiVersion: 'projectcalico.org/v3', kind: 'IPPool', metadata: { name: ACTIVE.name }, spec: active }),
    );
    await calicoctl(['patch', 'ippool', POOL, '-p', '{"spec":{"disabled":true}}']);
    const disabled = await client.get(T.ippool, undefined, POOL);
    expect([disabled.spec.disabled, managedBy(disabled)]).toEqual([true, 'tigera-operator']);
    const bundle = await exportTo(suite.work, 'owned-stopped-pool');
    await client.mergePatch(K.deployment, 'tigera-operator', 'tigera-operator', { spec: { replicas: 1 } });
    await waitOperator(cluster, 'v1.34.3');
    // The loss: deleted, the operator creates it again from its entry, enabled and its own (#9100).
    await loseStoppedPool(client);

    const notOwnedBefore = notOwnedCount(cluster);
    const { r, result } = await restoreStoppedPool(bundle);
    console.log(`v1.34.3 restore of the owned pool: exit ${r.code}; drifted ${JSON.stringify(result.drifted)}`);
    expect(result.actions.filter((a: any) => a.action === 'refused')).toEqual([]);
    const pool = result.actions.find((a: any) => a.id === `IPPool ${POOL}`);
    expect(pool.notes).toEqual(expect.arrayContaining([expect.stringMatching(/tigera operator v1\.34\.3's: .*written with nodeSelector: "!all\(\)"/)]));
    const inst = result.actions.find((a: any) => a.id === 'Installation default');
    expect(inst.notes).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/nodeSelector: "!all\(\)": pool default-ipv4-ippool is disabled in the bundle and tigera operator v1\.34\.3's/),
      ]),
    );
    expect(r.code, r.stderr).toBe(0);
    expect(result.drifted).toEqual([]);
    const cidr = (await client.get(T.ippool, undefined, POOL)).spec.cidr;
    const entry = (await client.get(T.installation, undefined, 'default')).spec.calicoNetwork.ipPools.find((e: any) => e.cidr === cidr);
    expect(entry.nodeSelector).toBe('!all()');

    // Under the resumed operator, the Installation touched every 15 s (each touch a reconcile of the pool controller,
    // which watches it): sampled every second, the pool never allocates.
    const since = Date.now();
    const { seen, touches } = await watchPoolNonAllocating(client, POOL, { durationMs: WATCH_MS, touchEveryMs: 15_000, since });
    console.log(`${POOL} over ${WATCH_MS / 1000} s, ${touches} touches: ${JSON.stringify([...seen])}`);
    expect(touches).toBeGreaterThanOrEqual(4);
    // The operator's own rewrite from the stopped entry (its pool type has no disabled): marked, nodeSelector "!all()".
    const rewritten = await client.get(T.ippool, undefined, POOL);
    expect([managedBy(rewritten), rewritten.spec.nodeSelector, nonAllocating(rewritten)], JSON.stringify(rewritten.spec)).toEqual([
      'tigera-operator',
      '!all()',
      true,
    ]);
    expect(notOwnedCount(cluster), 'the operator said it does not own the pool').toBe(notOwnedBefore);
    await waitTigeraStatusAvailable(client, 'ippools', 60_000);
    await waitTigeraStatusAvailable(client, 'calico', 60_000);

    // New allocations by libcalico-go's IPAM, as the CNI plugin asks (auto-assign on the nodes): none from the pool.
    const log = path.join(suite.work, 'after-restore.jsonl');
    const churn = await startChurn(log, { nodes: ['rso-node-1', 'rso-node-2'], prefix: `rso${Date.now().toString(36)}`, rate: 8, target: 6, durationS: 5 });
    expect(await churn.done).toBe(0);
    const evs = readEvents(log);
    const assigned = evs.filter((e) => e.op === 'assign').map((e) => e.ip!);
    expect(assigned.length).toBeGreaterThanOrEqual(3);
    expect(assigned.filter((ip) => !ip.startsWith(ACTIVE.prefix))).toEqual([]);
    // Every address held by its pod: the set-up's, which the restore kept, and the new ones.
    await podsForDriverAllocations(client, evs, DRIVER_NS);
    const all = [...suite.events(), ...evs];
    await expectDriverPodsIntact(client, all);
    await expectPodAddressesHeld(client, heldByLog(all).size);
  }, 1_800_000);
});
