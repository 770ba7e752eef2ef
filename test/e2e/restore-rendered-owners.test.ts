/**
 * Issue 29: what the tigera operator rendered (the calico-node DaemonSet and its friends) is in no bundle, but it is
 * owned by the Installation. When the Installation goes with its CRD and nobody tears Calico down (no operator ran
 * its finalizer), the garbage collector cannot judge the reference while nobody serves the kind, and leaves the
 * DaemonSet alone; as soon as restore serves `installations.operator.tigera.io` again it finds the owner missing and
 * deletes calico-node on every node. Restore now treats such objects as the bundle's objects with gone owners: the
 * reference is taken off before any CRD is created and linked to the restored Installation after.
 *
 * The operator is not run here (kwok fakes its pod): with the real operator running, the Installation's finalizer
 * makes the operator tear calico-node down itself before the CRD goes (restore-operator.test.ts), and there is
 * nothing left to keep.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject } from '../../src/kube/types.js';
import { applyFixture, explain, operatorType, resetCalico, runCli, testClient } from './helpers.js';

const INSTALLATION = operatorType('installations', 'Installation');
const CRD = 'installations.operator.tigera.io';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let client: KubeClient;
const work = mkdtempSync(path.join(os.tmpdir(), 'cnr-rendered-'));

describe('restore keeps what the operator rendered from the garbage collector (issue 29)', () => {
  beforeAll(async () => {
    client = await testClient();
    await resetCalico(client);
    await applyFixture(client, '3.28.1', 'tigera-operator.yaml');
    await applyFixture(client, '3.28.1', 'custom-resources.yaml');
  }, 600_000);
  afterAll(async () => {
    await client.delete(K.daemonSet, 'calico-system', 'calico-node').catch(() => undefined);
    await resetCalico(client);
    client.close();
    rmSync(work, { recursive: true, force: true });
  }, 600_000);

  it('the calico-node DaemonSet owned by a lost Installation survives the restore, linked to the restored one', async () => {
    const inst = await client.get(INSTALLATION, undefined, 'default');
    await client.apply(K.namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'calico-system' } }, { fieldManager: 'e2e' });
    const owner = {
      apiVersion: 'operator.tigera.io/v1',
      kind: 'Installation',
      name: 'default',
      uid: inst.metadata.uid!,
      controller: true,
      blockOwnerDeletion: true,
    };
    const labels = { 'k8s-app': 'calico-node' };
    // As v1.34.3 renders it (controller reference to the Installation), with no node to run on.
    const ds = await client.create<KubeObject>(K.daemonSet, {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name: 'calico-node', namespace: 'calico-system', ownerReferences: [owner] },
      spec: {
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: { nodeSelector: { 'cni-rewind.io/no-such-node': 'x' }, containers: [{ name: 'calico-node', image: 'docker.io/calico/node:v3.28.1' }] },
        },
      },
    });
    const bundle = path.join(work, 'bundle');
    const e = await runCli(['export', '--out', bundle]);
    expect(e.code, explain(e)).toBe(0);

    // The Installation lost with its CRD and nobody tearing down. Released while the CRD goes (the collector would
    // delete the DaemonSet while it still knows the kind), the reference put back once the collector has forgotten
    // the kind (it re-reads discovery every 30 s): the state the incident leaves when no operator runs.
    await client.mergePatch(K.daemonSet, 'calico-system', 'calico-node', { metadata: { ownerReferences: null } });
    await client.mergePatch(INSTALLATION, undefined, 'default', { metadata: { finalizers: null } });
    await client.delete(K.crd, undefined, CRD);
    await client.waitFor('the installations CRD to be gone', async () => ((await client.getOrUndefined(K.crd, undefined, CRD)) ? undefined : true), {
      timeoutMs: 60_000,
    });
    await sleep(45_000);
    await client.mergePatch(K.daemonSet, 'calico-system', 'calico-node', { metadata: { ownerReferences: [owner] } });
    await sleep(10_000);
    expect(await client.getOrUndefined(K.daemonSet, 'calico-system', 'calico-node'), 'the collector cannot judge a kind nobody serves').toBeDefined();

    const r = await runCli(['restore', bundle, '--resources', '--yes', '-o', 'json'], { timeoutMs: 900_000 });
    expect(r.code, explain(r)).toBe(0);
    const result = JSON.parse(r.stdout);
    expect(result.crdsToCreate).toContain(CRD);
    const restored = await client.get(INSTALLATION, undefined, 'default');
    expect(restored.metadata.uid).not.toBe(inst.metadata.uid);
    // Without the release the collector deletes it 16-30 s after the kind is served again (measured for restore.test.ts).
    await sleep(40_000);
    const after = await client.getOrUndefined<KubeObject>(K.daemonSet, 'calico-system', 'calico-node');
    expect(after?.metadata.uid, 'calico-node deleted by the garbage collector after the restore').toBe(ds.metadata.uid);
    expect(result.actions.find((a: any) => a.id === 'DaemonSet calico-system/calico-node')?.goneOwners).toEqual(['Installation default']);
    expect(after!.metadata.ownerReferences).toEqual([expect.objectContaining({ kind: 'Installation', name: 'default', uid: restored.metadata.uid })]);
  }, 900_000);
});
