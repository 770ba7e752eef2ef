/**
 * wrap: the incident's destructive downgrade step (`kubectl delete -f tigera-operator.yaml` of 3.28.1, which
 * deletes every Calico CRD and with them all IP pools, IPAM and policies) run under `wrap --restore-on-failure`
 * ends with the Calico data back. Also: a healthy command passes, and the command's exit code passes through.
 */
import { mkdtempSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCK_NAME, LOCK_NAMESPACE } from '../../src/apply/lock.js';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { deleteNodes, fixturePath, kubeconfig, resetCalico, runCli, testClient } from './helpers.js';
import { calicoSnapshot, installCalico328 } from './plan-support.js';
import { populateCalico, type Population } from './population.js';

/** The kubectl built with the test control plane (~/.cache/cni-rewind-e2e/<version>/bin/kubectl). */
function kubectlPath(): string {
  const cache = path.join(os.homedir(), '.cache', 'cni-rewind-e2e');
  for (const v of readdirSync(cache)) {
    const p = path.join(cache, v, 'bin', 'kubectl');
    try {
      if (readdirSync(path.dirname(p)).includes('kubectl')) return p;
    } catch {
      /* not a version folder */
    }
  }
  throw new Error(`kubectl not found under ${cache}: build the test control plane first (control-plane/build.sh)`);
}

describe('wrap: back up, run a risky command, check, restore on failure', () => {
  let client: KubeClient;
  let dir: string;
  let population: Population;

  beforeAll(async () => {
    client = await testClient();
    dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-wrap-e2e-'));
    await resetCalico(client);
    await client.delete(K.lease, LOCK_NAMESPACE, LOCK_NAME);
    await deleteNodes(client, 'fwr-');
    await createFakeNodes(client, [{ name: 'fwr-1' }, { name: 'fwr-2' }]);
    await installCalico328(client);
    population = await populateCalico(client, { prefix: 'fwr', nodes: ['fwr-1', 'fwr-2'] });
    await installCalico328(client);
  });
  afterAll(async () => {
    await deleteNodes(client, 'fwr-');
    client.close();
  });

  it('a harmless command: healthy, exit 0; a failing one: its exit code passes through with the restore command', async () => {
    const ok = await runCli(['wrap', '--out', path.join(dir, 'b-ok'), '-o', 'json', '--', 'true']);
    expect(ok.code, ok.stderr).toBe(0);
    const r = JSON.parse(ok.stdout);
    expect(r.check).toMatchObject({ healthy: true, lost: [], errors: [] });
    expect(r.bundle.path).toBe(path.join(dir, 'b-ok'));

    const bad = await runCli(['wrap', '--out', path.join(dir, 'b-bad'), '--', 'sh', '-c', 'exit 7']);
    expect(bad.code).toBe(7);
    expect(bad.stdout).toContain(`restore with: cni-rewind restore ${path.join(dir, 'b-bad')} --resources`);
    const none = await runCli(['wrap']);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/wrap needs a command after --/);
  });

  it('wrap --restore-on-failure -- kubectl delete -f <3.28.1 tigera-operator.yaml> ends with the Calico data restored', async () => {
    const before = await calicoSnapshot(client);
    const r = await runCli(
      [
        'wrap',
        '--restore-on-failure',
        '--out',
        path.join(dir, 'b-delete'),
        '-o',
        'json',
        '--',
        kubectlPath(),
        '--kubeconfig',
        kubeconfig(),
        'delete',
        '-f',
        fixturePath('3.28.1', 'tigera-operator.yaml'),
        '--wait=true',
      ],
      { timeoutMs: 900_000 },
    );
    const res = JSON.parse(r.stdout);
    // kubectl itself succeeded; wrap saw the damage and restored.
    expect(res.command.exitCode, r.stderr).toBe(0);
    expect(res.check.healthy).toBe(false);
    const lostKinds = new Set(res.check.lost.map((x: any) => x.kind));
    for (const k of ['IPPool', 'IPAMBlock', 'IPAMHandle', 'BlockAffinity', 'GlobalNetworkPolicy', 'NetworkPolicy', 'Installation'])
      expect(lostKinds, k).toContain(k);
    expect(res.restored, r.stderr).toBeDefined();
    console.log(
      `wrap: ${res.check.lost.length} objects lost by the delete; restore ok=${res.restored.ok}${res.restored.failures.length ? `, not restored: ${res.restored.failures.map((f: any) => f.id).join(', ')}` : ''}; exit ${r.code}`,
    );
    expect(r.code).toBe(res.restored.ok ? 1 : 3);

    // Every Calico data object is back with the same content.
    const after = await calicoSnapshot(client);
    for (const o of population.objects.filter((x) => x.apiVersion.startsWith('crd.projectcalico.org'))) {
      const k = `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
      expect(after.data[k], k).toBe(before.data[k]);
    }
    for (const k of Object.keys(before.data)) expect(after.data[k], k).toBe(before.data[k]);
    expect(Object.keys(after.crds).sort()).toEqual(Object.keys(before.crds).sort());
  });
});
