/**
 * Issue 30's "finalizers of the 3.30+ operators survive a downgrade", on the real programs: Calico 3.30.7 installed
 * as its docs say (operator-crds.yaml, tigera-operator.yaml, custom-resources.yaml with its Goldmane and Whisker),
 * so the real v1.38.13 operator's whisker and goldmane controllers put `operator.tigera.io/whisker-controller` and
 * `goldmane-controller` on Installation default. `plan --to 3.29.7` + `apply` downgrade to the real v1.36.16
 * operator, which knows neither: its core controller waits for every other finalizer before it lets the CNI plugin
 * go and removes its own (core_controller.go "Waiting for finalization to complete before removing CNI resources"),
 * so a leftover one keeps the Installation Terminating for ever. The plan shows the step that removes them, and
 * afterwards uninstalling as the 3.29 docs say (`kubectl delete -f custom-resources.yaml`: the Installation and the
 * APIServer, whose finalizer v1.36 keeps while the APIServer exists) completes, teardown included.
 */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { installationFinalizersOf } from '../../src/calico/operator-generations.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { applyFixture, fixturePath, operatorType, runCli } from './helpers.js';
import {
  applyLogged,
  kubectl,
  waitApiServiceAvailable,
  waitCalicoUninstalled,
  waitOperator,
  waitTigeraStatusAvailable,
  withRealCalico,
} from './calico-support.js';

const INSTALLATION = operatorType('installations', 'Installation');
const TIGERA_STATUS = operatorType('tigerastatuses', 'TigeraStatus');
/** tigera/operator v1.38.13 pkg/render/finalizers.go:33,41, added by whisker/controller.go:289 and goldmane/controller.go:260. */
const V138_FINALIZERS = ['operator.tigera.io/whisker-controller', 'operator.tigera.io/goldmane-controller'];
/** Long enough for the v1.36 teardown on a loaded machine (about 10 s alone), short of "for ever". */
const DELETE_BOUND_MS = 300_000;
let client: KubeClient;
let cluster: LocalCluster;
let dir: string;

/** What holds the delete up: the Installation's finalizers, the namespaces, and the operator's waiting lines. */
async function deleteState(): Promise<string> {
  const inst = await client.getOrUndefined(INSTALLATION, undefined, 'default');
  const lines = [
    `Installation default: ${inst ? `finalizers ${inst.metadata.finalizers?.join(', ') || 'none'}, deleting since ${inst.metadata.deletionTimestamp ?? '-'}` : 'gone'}`,
  ];
  for (const ns of ['calico-system', 'calico-apiserver']) {
    const o = await client.getOrUndefined(K.namespace, undefined, ns);
    lines.push(`namespace ${ns}: ${o ? `${o.status?.phase} ${JSON.stringify(o.status?.conditions ?? [])}` : 'gone'}`);
  }
  const log = path.join(cluster.dir, 'run', 'tigera-operator.log');
  if (existsSync(log)) {
    const all = readFileSync(log, 'utf8').trimEnd().split('\n');
    lines.push('tigera-operator.log (waiting lines, last 5):', ...all.filter((l) => l.includes('Waiting for finalization')).slice(-5));
    lines.push('tigera-operator.log (end):', ...all.slice(-15));
  }
  return lines.join('\n');
}

describe('3.30.7 -> 3.29.7 with the real v1.38.13 and v1.36.16 operators: the Installation can still be deleted', () => {
  const real = withRealCalico('cfz', { operators: ['v1.38.13', 'v1.36.16'], calico: ['v3.30.7', 'v3.29.7'] });
  beforeAll(() => {
    client = real.client();
    cluster = real.cluster;
    dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-3307-finalizers-'));
  });

  it(
    'the plan removes the whisker and goldmane finalizers, and kubectl delete of the Installation completes under v1.36',
    async () => {
      await applyFixture(client, '3.30.7', 'operator-crds.yaml');
      await applyFixture(client, '3.30.7', 'tigera-operator.yaml');
      await applyFixture(client, '3.30.7', 'custom-resources.yaml');
      await waitOperator(cluster, 'v1.38.13');
      await waitApiServiceAvailable(client, 240_000);
      for (const name of ['calico', 'whisker', 'goldmane']) await waitTigeraStatusAvailable(client, name);
      const before = (await client.get(INSTALLATION, undefined, 'default')).metadata.finalizers ?? [];
      console.log(`3.30.7 Installation finalizers: ${before.join(', ')}`);
      expect(before).toEqual(expect.arrayContaining(V138_FINALIZERS));

      const bundle = path.join(dir, 'bundle');
      const e = await runCli(['export', '--out', bundle]);
      expect(e.code, e.stderr).toBe(0);
      const planFile = path.join(dir, 'plan.yaml');
      const p = await runCli(['plan', '--to', '3.29.7', '--bundle', bundle, '--no-disk-snapshots', '--out', planFile, '-o', 'json']);
      expect(p.code, p.stdout + p.stderr).toBe(0);
      const plan = JSON.parse(p.stdout);
      console.log(`plan: ${plan.steps.map((s: any) => s.id).join(', ')}; findings ${plan.findings.map((f: any) => f.id).join(', ')}`);
      // Soft: the plan's shape is checked, and the delete below still runs and says whether the cluster is stuck.
      expect.soft(plan.steps.map((s: any) => s.id)).toContain('remove-operator-leftovers');
      expect.soft([...(plan.transforms.installation.removeFinalizers ?? [])].sort()).toEqual([...V138_FINALIZERS].sort());

      const a = await applyLogged(planFile, 'apply');
      expect(a.code, a.stderr + a.stdout).toBe(0);
      const leftovers = a.res.steps.find((s: any) => s.id === 'remove-operator-leftovers');
      expect.soft(leftovers?.summary).toMatch(/whisker-controller/);
      await waitOperator(cluster, 'v1.36.16');
      await waitTigeraStatusAvailable(client, 'calico');
      const after = (await client.get(INSTALLATION, undefined, 'default')).metadata.finalizers ?? [];
      console.log(`3.29.7 Installation finalizers: ${after.join(', ')}`);
      // Only finalizers the v1.36 operator sets and clears itself.
      expect.soft(after.filter((f) => !installationFinalizersOf('v3.29.7').includes(f))).toEqual([]);
      for (const name of ['whisker', 'goldmane']) expect.soft(await client.getOrUndefined(TIGERA_STATUS, undefined, name), name).toBeUndefined();

      // Uninstalled as the 3.29 docs say; the v1.36 operator tears Calico down and removes its own finalizers last.
      const deletedAt = Date.now();
      await kubectl(cluster, ['delete', '-f', fixturePath('3.29.7', 'custom-resources.yaml'), '--wait=false']);
      await waitCalicoUninstalled(client, { who: 'v1.36', deletedAt, timeoutMs: DELETE_BOUND_MS, state: deleteState, cluster });
    },
    30 * 60_000,
  );
});
