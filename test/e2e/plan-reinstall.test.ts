/**
 * `--strategy reinstall`: the users' delete-and-create procedure (which deletes every Calico CRD on 3.27/3.28)
 * made safe by the bundle: on a populated 3.28.1 cluster, downgrade to 3.27.4 by removing everything and
 * restoring all Calico data; nothing may be lost.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkAgainstSchema } from '../../src/calico/schema.js';
import { LOCK_NAME, LOCK_NAMESPACE } from '../../src/apply/lock.js';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { crdResourceType } from '../../src/kube/discovery.js';
import type { KubeObject } from '../../src/kube/types.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { releasesDir } from '../support/releases.js';
import { canonicalJson } from '../../src/util/canonical.js';
import { deleteNodes, fixtureObjects, resetCalico, runCli, testClient } from './helpers.js';
import { calicoSnapshot, installCalico328 } from './plan-support.js';
import { populateCalico, type Population } from './population.js';

describe('plan --strategy reinstall: delete-and-create without losing anything', () => {
  let client: KubeClient;
  let dir: string;
  let population: Population;

  beforeAll(async () => {
    client = await testClient();
    dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-reinstall-e2e-'));
    await resetCalico(client);
    await client.delete(K.lease, LOCK_NAMESPACE, LOCK_NAME);
    await deleteNodes(client, 'fri-');
    await createFakeNodes(client, [{ name: 'fri-1' }, { name: 'fri-2' }]);
    await installCalico328(client);
    population = await populateCalico(client, { prefix: 'fri', nodes: ['fri-1', 'fri-2'] });
    await installCalico328(client);
  });
  afterAll(async () => {
    await deleteNodes(client, 'fri-');
    client.close();
  });

  it('removes 3.28.1 (CRDs and all), installs 3.27.4 and restores every pool, IPAM object and policy unchanged', async () => {
    const before = await calicoSnapshot(client);
    const bundle = path.join(dir, 'bundle');
    const e = await runCli(['export', '--out', bundle]);
    expect(e.code, e.stderr).toBe(0);
    const plan = path.join(dir, 'plan.json');
    const p = await runCli([
      'plan',
      '--to',
      '3.27.4',
      '--manifests',
      releasesDir(),
      '--bundle',
      bundle,
      '--no-disk-snapshots',
      '--strategy',
      'reinstall',
      '--out',
      plan,
      '-o',
      'json',
    ]);
    expect(p.code, p.stderr).toBe(0);
    const planned = JSON.parse(p.stdout);
    expect(planned.steps.map((s: any) => s.id)).toEqual([
      'preflight',
      'pause-operator',
      'remove-old',
      'install-target',
      'restore-data',
      'transform-installation',
      'resume-operator',
      'wait-rollout',
      'verify-data',
    ]);

    // Watch the IPPool CRD's uid: a reinstall really deletes and re-creates it.
    const uidBefore = (await client.get(K.crd, undefined, 'ippools.crd.projectcalico.org')).metadata.uid;
    const r = await runCli(['apply', plan, '--yes', '-o', 'json']);
    expect(r.code, r.stderr + r.stdout).toBe(0);
    const res = JSON.parse(r.stdout);
    console.log('reinstall steps:', res.steps.map((s: any) => `${s.id} ${(s.ms / 1000).toFixed(1)}s`).join(', '));
    expect((await client.get(K.crd, undefined, 'ippools.crd.projectcalico.org')).metadata.uid).not.toBe(uidBefore);

    const after = await calicoSnapshot(client);
    for (const o of population.objects.filter((x) => x.apiVersion.startsWith('crd.projectcalico.org'))) {
      const k = `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
      expect(after.data[k], k).toBe(before.data[k]);
    }
    const calicoKeys = (s: typeof before) =>
      Object.keys(s.data)
        .filter((k) => !k.startsWith('Installation/') && !k.startsWith('APIServer/'))
        .sort();
    expect(calicoKeys(after)).toEqual(calicoKeys(before));
    expect(after.operator).toEqual({ image: 'quay.io/tigera/operator:v1.32.10', replicas: 1 });
    const want = fixtureObjects('3.27.4', 'tigera-operator.yaml').filter((o) => o.kind === 'CustomResourceDefinition');
    for (const crd of want)
      expect(after.crds[crd.metadata.name], crd.metadata.name).toBe(canonicalJson(crd.spec.versions.map((v: any) => ({ name: v.name, schema: v.schema }))));
    const instCrd = want.find((c) => c.metadata.name === 'installations.operator.tigera.io')!;
    const inst = await client.get(crdResourceType(instCrd), undefined, 'default');
    const { status: _s, ...noStatus } = inst;
    expect(checkAgainstSchema(noStatus as KubeObject, instCrd)).toEqual([]);
    expect(inst.spec.calicoNetwork.ipPools).toHaveLength(1);
    expect(inst.spec.calicoNetwork.ipPools[0]).toMatchObject({ cidr: '192.168.0.0/16', encapsulation: 'VXLANCrossSubnet' });
  });
});
