/**
 * The steps restore-stopped-pool.test.ts (operator v1.34.3) and restore-stopped-pool-v136.test.ts (v1.36.16) share
 * (issue 30): default-ipv4-ippool released from the operator and disabled, as the operator's own log judges it; the
 * pool lost, so the operator creates it again from its Installation entry, enabled (Calico issue #9100); and the
 * restore of the bundle taken in between, which must write the pool back.
 */
import { expect } from 'vitest';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject } from '../../src/kube/types.js';
import type { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { runCli, type CliResult } from './helpers.js';
import { calicoctl, operatorLog, waitOperator } from './calico-support.js';
import { T } from './restore-support.js';

/** The pool the Installation lists, which the tests release from the operator. */
export const STOPPED_POOL = 'default-ipv4-ippool';
/** pool_controller.go's line for a pool without its managed-by label. */
export const NOT_OWNED = 'Cannot update an IP pool not owned by the operator';

export const managedBy = (p: KubeObject) => JSON.parse(p.metadata.annotations?.['projectcalico.org/metadata'] ?? '{}').labels?.['app.kubernetes.io/managed-by'];

/** How many times the operator has said so far that a pool is not its own. */
export const notOwnedCount = (cluster: LocalCluster) => operatorLog(cluster).filter((l) => l.includes(NOT_OWNED)).length;

/**
 * While the operator `operatorTag` is scaled down: an enabled pool of the user's named `activePool` that the
 * Installation does not list (where new pods go instead: the installation controller waits while no enabled pool
 * exists), and STOPPED_POOL's managed-by label removed and `poolPatch` applied to its spec. Then the operator runs
 * again and says itself that the pool is not its own; the pool is still disabled.
 */
export async function releaseStoppedPool(
  client: KubeClient,
  cluster: LocalCluster,
  opts: { operatorTag: string; activePool: string; poolPatch: Record<string, unknown> },
): Promise<void> {
  await client.mergePatch(K.deployment, 'tigera-operator', 'tigera-operator', { spec: { replicas: 0 } });
  await client.waitFor('the operator to stop', async () => (cluster.calicoStatus()?.operator?.pid ? undefined : true), { timeoutMs: 120_000 });
  const active = { cidr: '10.66.0.0/16', blockSize: 26, ipipMode: 'Never', vxlanMode: 'CrossSubnet', natOutgoing: true, nodeSelector: 'all()' };
  await calicoctl(
    ['create', '-f', '-'],
    JSON.stringify({ apiVersion: 'projectcalico.org/v3', kind: 'IPPool', metadata: { name: opts.activePool }, spec: active }),
  );
  await calicoctl(['label', 'ippool', STOPPED_POOL, 'app.kubernetes.io/managed-by', '--remove']);
  await calicoctl(['patch', 'ippool', STOPPED_POOL, '-p', JSON.stringify({ spec: opts.poolPatch })]);
  const notOwnedBefore = notOwnedCount(cluster);
  await client.mergePatch(K.deployment, 'tigera-operator', 'tigera-operator', { spec: { replicas: 1 } });
  await waitOperator(cluster, opts.operatorTag);
  // The real operator's own judgement: not its pool, left alone.
  await client.waitFor('the operator to say the pool is not its own', async () => (notOwnedCount(cluster) > notOwnedBefore ? true : undefined), {
    timeoutMs: 180_000,
  });
  expect((await client.get(T.ippool, undefined, STOPPED_POOL)).spec.disabled).toBe(true);
}

/** STOPPED_POOL lost: the operator creates it again from its Installation entry, enabled and its own (#9100). */
export async function loseStoppedPool(client: KubeClient): Promise<void> {
  await calicoctl(['delete', 'ippool', STOPPED_POOL]);
  await client.waitFor(
    'the operator to create the pool again, enabled',
    async () => {
      const p = await client.getOrUndefined(T.ippool, undefined, STOPPED_POOL);
      return p && !p.spec.disabled && managedBy(p) === 'tigera-operator' ? true : undefined;
    },
    { timeoutMs: 180_000 },
  );
}

/**
 * `restore BUNDLE --resources` over the re-created pool: STOPPED_POOL is updated (written back as the bundle has it).
 * Returns the CLI result and its JSON report, for the caller's checks of the Installation entry.
 */
export async function restoreStoppedPool(bundle: string): Promise<{ r: CliResult; result: any }> {
  const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json'], { timeoutMs: 1_500_000 });
  const result = JSON.parse(r.stdout);
  const pool = result.actions.find((a: any) => a.id === `IPPool ${STOPPED_POOL}`);
  expect(pool.action, JSON.stringify(pool)).toBe('update');
  return { r, result };
}
