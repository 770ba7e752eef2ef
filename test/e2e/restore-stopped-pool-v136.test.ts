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
import type { KubeClient } from '../../src/kube/client.js';
import { applyFixture } from './helpers.js';
import { waitApiServiceAvailable, waitOperator, waitPoolAndDatastoreReady, waitTigeraStatusAvailable, withRealCalico } from './calico-support.js';
import { T, exportTo } from './restore-support.js';
import { STOPPED_POOL as POOL, loseStoppedPool, managedBy, releaseStoppedPool, restoreStoppedPool } from './stopped-pool-support.js';

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
    await releaseStoppedPool(client, real.cluster, { operatorTag: 'v1.36.16', activePool: 'rsq-active-pool', poolPatch: { disabled: true } });
    const bundle = await exportTo(work, 'stopped-pool');

    await loseStoppedPool(client);
    const { r, result } = await restoreStoppedPool(bundle);
    const inst = result.actions.find((a: any) => a.id === 'Installation default');
    expect(inst.notes).toEqual(expect.arrayContaining([expect.stringMatching(/disableNewAllocations: true.*default-ipv4-ippool/)]));
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
