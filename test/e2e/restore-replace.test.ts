/**
 * `restore --existing replace` with Calico's real programs (Calico 3.28.1 under the real tigera operator v1.34.3):
 * a differing Installation `default` carries the operator's finalizers (tigera.io/operator-cleanup and v1.34's
 * own) and owns everything the operator renders. Deleted and re-created while the restore pauses the operator, it
 * would stay Terminating on those finalizers and the resumed operator would start its teardown (issue 30): it is
 * updated in place instead, and says so; so is an object other objects name as their owner (the garbage collector
 * would delete them with it). A differing object without finalizers or dependents is still re-created
 * (restore.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import { runCli } from './helpers.js';
import { waitTigeraStatusAvailable } from './calico-support.js';
import { T, exportTo, operatorReplicas, restoreSuite } from './restore-support.js';

describe('restore --existing replace never deletes an object with finalizers or dependents (the real v1.34.3)', () => {
  let client: KubeClient;
  const suite = restoreSuite('rrp', (c) => (client = c));

  it('a differing Installation default is updated in place: same UID, never Terminating, Calico stays installed', async () => {
    const bundle = await exportTo(suite.work, 'installation');
    const before = await client.get(T.installation, undefined, 'default');
    expect(before.metadata.finalizers).toEqual(expect.arrayContaining(['tigera.io/operator-cleanup']));
    const replicas = await operatorReplicas(client);
    // A label the bundle lacks: the Installation differs, and nothing the operator reconciles changes.
    await client.mergePatch(T.installation, undefined, 'default', { metadata: { labels: { 'rrp.example/edited': 'yes' } } });

    const r = await runCli(['restore', bundle, '--resources', '--yes', '--existing', 'replace', '--kinds', 'Installation', '-o', 'json'], {
      timeoutMs: 300_000,
    });
    const result = JSON.parse(r.stdout);
    const inst = result.actions.find((a: any) => a.id === 'Installation default');
    expect(inst.action).toBe('update');
    expect(inst.notes).toEqual(
      expect.arrayContaining([expect.stringMatching(/^updated in place, not deleted and re-created .*finalizers \(.*tigera\.io\/operator-cleanup/)]),
    );
    expect(r.code, r.stderr).toBe(0);
    const after = await client.get(T.installation, undefined, 'default');
    expect(after.metadata.uid).toBe(before.metadata.uid);
    expect(after.metadata.deletionTimestamp).toBeUndefined();
    expect(after.metadata.labels?.['rrp.example/edited']).toBeUndefined();
    expect(await operatorReplicas(client)).toBe(replicas);
    // The resumed operator keeps Calico installed: no teardown of what the Installation owns.
    await waitTigeraStatusAvailable(client, 'calico');
    const ns = await client.get(K.namespace, undefined, 'calico-system');
    expect(ns.metadata.deletionTimestamp).toBeUndefined();
    expect((await client.get(T.installation, undefined, 'default')).metadata.deletionTimestamp).toBeUndefined();
  }, 1_200_000);

  it('a differing object others name as their owner is updated in place: same UID, its dependent kept', async () => {
    const set = { apiVersion: 'crd.projectcalico.org/v1', kind: 'GlobalNetworkSet', metadata: { name: 'rrp-owner' }, spec: { nets: ['198.51.100.0/24'] } };
    await client.create(T.gns, set);
    const bundle = await exportTo(suite.work, 'owner');
    const owner = await client.get(T.gns, undefined, 'rrp-owner');
    // Something else's object that names the set as its owner: the garbage collector deletes it once the set is gone.
    const ownerRef = { apiVersion: 'crd.projectcalico.org/v1', kind: 'GlobalNetworkSet', name: 'rrp-owner', uid: owner.metadata.uid! };
    await client.create(K.configMap, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'rrp-dependent', namespace: 'calico-system', ownerReferences: [ownerRef] },
      data: { note: 'owned by GlobalNetworkSet rrp-owner' },
    });
    await client.mergePatch(T.gns, undefined, 'rrp-owner', { spec: { nets: ['198.51.100.0/25'] } });

    const r = await runCli(['restore', bundle, '--resources', '--yes', '--existing', 'replace', '--kinds', 'GlobalNetworkSet', '-o', 'json'], {
      timeoutMs: 300_000,
    });
    const result = JSON.parse(r.stdout);
    const action = result.actions.find((a: any) => a.id === 'GlobalNetworkSet rrp-owner');
    expect(action.action).toBe('update');
    expect(action.notes).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^updated in place, not deleted and re-created .*name it as their owner \(ConfigMap calico-system\/rrp-dependent\)/),
      ]),
    );
    expect(r.code, r.stderr).toBe(0);
    const after = await client.get(T.gns, undefined, 'rrp-owner');
    expect(after.metadata.uid).toBe(owner.metadata.uid);
    expect(after.spec.nets).toEqual(['198.51.100.0/24']);
    // The collector deletes a dependent within seconds of its owner's deletion (owners.ts measured 16 s at most).
    await new Promise((done) => setTimeout(done, 20_000));
    expect((await client.getOrUndefined(K.configMap, 'calico-system', 'rrp-dependent'))?.metadata.ownerReferences).toEqual([ownerRef]);
  }, 600_000);
});
