/**
 * A disabled pool the operator does not own, restored under Calico 3.29.7's real tigera operator v1.36.16 (issue 30):
 * from v1.36 a pool's `disabled` converts to disableNewAllocations, so disabling an unlabelled pool alone makes it
 * unequal to its entry and the operator leaves it alone. Restore writes it back disabled and sets
 * `disableNewAllocations: true` on its entry, after which the operator adopts it by equality, disabled.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject } from '../../src/kube/types.js';
import { applyFixture, runCli } from './helpers.js';
import {
  calicoctl,
  operatorLog,
  waitApiServiceAvailable,
  waitOperator,
  waitPoolAndDatastoreReady,
  waitTigeraStatusAvailable,
  withRealCalico,
} from './calico-support.js';
import { T, exportTo } from './restore-support.js';

const POOL = 'default-ipv4-ippool';
const NOT_OWNED = 'Cannot update an IP pool not owned by the operator';
const managedBy = (p: KubeObject) => JSON.parse(p.metadata.annotations?.['projectcalico.org/metadata'] ?? '{}').labels?.['app.kubernetes.io/managed-by'];

describe('restore of a disabled pool the operator does not own (the real v1.36.16)', () => {
  const real = withRealCalico('rsq', { operators: ['v1.36.16'], calico: ['v3.29.7'] });
  let client: KubeClient;
  const work = mkdtempSync(path.join(os.tmpdir(), 'cnr-rsq-'));
  beforeAll(async () => {
    client = real.client();
    await applyFixture(client, '3.29.7', 'tigera-operator.yaml');
    await applyFixture(client, '3.29.7', 'custom-resources.yaml');
    await waitOperator(real.cluster, 'v1.36.16');
    await waitApiServiceAvailable(client, 240_000);
    await waitTigeraStatusAvailable(client, 'calico');
    await waitPoolAndDatastoreReady(client);
  }, 30 * 60_000);

  it('writes it back disabled with disableNewAllocations on its entry; the operator then adopts it, disabled', async () => {
    const cluster = real.cluster;
    const active = { cidr: '10.66.0.0/16', blockSize: 26, ipipMode: 'Never', vxlanMode: 'CrossSubnet', natOutgoing: true, nodeSelector: 'all()' };
    await calicoctl(
      ['create', '-f', '-'],
      JSON.stringify({ apiVersion: 'projectcalico.org/v3', kind: 'IPPool', metadata: { name: 'rsq-active-pool' }, spec: active }),
    );
    await client.mergePatch(K.deployment, 'tigera-operator', 'tigera-operator', { spec: { replicas: 0 } });
    await client.waitFor('the operator to stop', async () => (cluster.calicoStatus()?.operator?.pid ? undefined : true), { timeoutMs: 120_000 });
    await calicoctl(['label', 'ippool', POOL, 'app.kubernetes.io/managed-by', '--remove']);
    await calicoctl(['patch', 'ippool', POOL, '-p', '{"spec":{"disabled":true}}']);
    const notOwnedBefore = operatorLog(cluster).filter((l) => l.includes(NOT_OWNED)).length;
    await client.mergePatch(K.deployment, 'tigera-operator', 'tigera-operator', { spec: { replicas: 1 } });
    await waitOperator(cluster, 'v1.36.16');
    await client.waitFor(
      'the operator to say the pool is not its own',
      async () => (operatorLog(cluster).filter((l) => l.includes(NOT_OWNED)).length > notOwnedBefore ? true : undefined),
      { timeoutMs: 180_000 },
    );
    expect((await client.get(T.ippool, undefined, POOL)).spec.disabled).toBe(true);
    const bundle = await exportTo(work, 'stopped-pool');

    await calicoctl(['delete', 'ippool', POOL]);
    await client.waitFor(
      'the operator to create the pool again, enabled',
      async () => {
        const p = await client.getOrUndefined(T.ippool, undefined, POOL);
        return p && !p.spec.disabled && managedBy(p) === 'tigera-operator' ? true : undefined;
      },
      { timeoutMs: 180_000 },
    );

    const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json'], { timeoutMs: 1_500_000 });
    const result = JSON.parse(r.stdout);
    const inst = result.actions.find((a: any) => a.id === 'Installation default');
    expect(inst.notes).toEqual(expect.arrayContaining([expect.stringMatching(/disableNewAllocations: true.*default-ipv4-ippool/)]));
    expect(result.actions.find((a: any) => a.id === `IPPool ${POOL}`).action).toBe('update');
    console.log(`v1.36.16 restore: exit ${r.code}; drifted ${JSON.stringify(result.drifted)}`);
    expect(r.code, r.stderr).toBe(0);
    const adopted = await client.waitFor(
      'the operator to adopt the pool',
      async () => {
        const p = await client.get(T.ippool, undefined, POOL);
        return managedBy(p) === 'tigera-operator' ? p : undefined;
      },
      { timeoutMs: 180_000 },
    );
    expect(adopted.spec.disabled).toBe(true);
    for (let touch = 1; touch <= 3; touch++) {
      await client.mergePatch(T.installation, undefined, 'default', { metadata: { annotations: { 'rsq.example/touch': String(touch) } } });
      await new Promise((done) => setTimeout(done, 15_000));
      expect((await client.get(T.ippool, undefined, POOL)).spec.disabled, `after touch ${touch}`).toBe(true);
    }
  }, 1_800_000);
});
