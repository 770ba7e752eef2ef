/**
 * A 3.28.1 -> 3.27.4 in-place downgrade with the real programs: Calico 3.28.1 installed through the real v1.34.3
 * operator (which creates the default pool, labels it, and puts its own finalizers on the Installation), then
 * `plan --to 3.27.4` + `apply`, after which the real v1.32.10 operator runs. apply's wait must be judged by what
 * v1.32 did (calico-node rendered at v3.27.4, its TigeraStatus), and the downgrade must leave nothing behind that
 * the 3.27 operator cannot handle: an uninstall (`kubectl delete -f custom-resources.yaml`) completes with nothing
 * left Terminating, and no TigeraStatus stays Degraded (calico#9100's users deleted and re-created everything instead).
 */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import type { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { fixturePath, operatorType, runCli } from './helpers.js';
import { applyLogged, installReal328, kubectl, tigeraCondition, waitCalicoUninstalled, withRealCalico } from './calico-support.js';

const INSTALLATION = operatorType('installations', 'Installation');
const TIGERA_STATUS = operatorType('tigerastatuses', 'TigeraStatus');
let client: KubeClient;
let cluster: LocalCluster;
let dir: string;

/** What holds an uninstall up: the Installation's and APIServer's finalizers, the namespaces' conditions, the v3
 * APIService (an unavailable one stalls namespace deletion) and the end of the operator's log. */
async function uninstallState(): Promise<string> {
  const lines: string[] = [];
  for (const kind of ['installations', 'apiservers']) {
    const o = await client.getOrUndefined(operatorType(kind, kind === 'installations' ? 'Installation' : 'APIServer'), undefined, 'default');
    lines.push(
      `${kind}/default: ${o ? `finalizers ${o.metadata.finalizers?.join(', ') || 'none'}, deleting since ${o.metadata.deletionTimestamp ?? '-'}` : 'gone'}`,
    );
  }
  for (const ns of ['calico-system', 'calico-apiserver']) {
    const o = await client.getOrUndefined(K.namespace, undefined, ns);
    lines.push(`namespace ${ns}: ${o ? `${o.status?.phase} ${JSON.stringify(o.status?.conditions ?? [])}` : 'gone'}`);
  }
  const svc = await client.request<any>('GET', '/apis/apiregistration.k8s.io/v1/apiservices/v3.projectcalico.org').catch(() => undefined);
  lines.push(`APIService v3.projectcalico.org: ${svc ? JSON.stringify(svc.status?.conditions ?? []) : 'none'}`);
  const log = path.join(cluster.dir, 'run', 'tigera-operator.log');
  if (existsSync(log)) lines.push('tigera-operator.log (end):', ...readFileSync(log, 'utf8').trimEnd().split('\n').slice(-25));
  return lines.join('\n');
}

describe('3.28.1 -> 3.27.4 downgrade with the real tigera operators', () => {
  const real = withRealCalico('cdg');
  beforeAll(() => {
    client = real.client();
    cluster = real.cluster;
    dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-downgrade-real-'));
  });

  it(
    "apply waits for the v1.32 operator's own rollout; afterwards the Installation can be deleted and no status stays Degraded",
    async () => {
      await installReal328(client, cluster);
      const inst328 = await client.get(INSTALLATION, undefined, 'default');
      console.log(`3.28.1 Installation finalizers: ${inst328.metadata.finalizers?.join(', ')}`);

      const bundle = path.join(dir, 'bundle');
      expect((await runCli(['export', '--out', bundle])).code).toBe(0);
      const planFile = path.join(dir, 'plan.yaml');
      const p = await runCli(['plan', '--to', '3.27.4', '--bundle', bundle, '--no-disk-snapshots', '--out', planFile, '-o', 'json']);
      expect(p.code, p.stdout + p.stderr).toBe(0);

      const a = await applyLogged(planFile, 'apply');
      const res = a.res;
      expect(a.code, a.stderr + a.stdout).toBe(0);
      // By the time apply says done, v1.32 has rendered calico-node at 3.27.4 and reported on it.
      const node = await client.get(K.daemonSet, 'calico-system', 'calico-node');
      const image = node.spec.template.spec.containers.find((c: any) => c.name === 'calico-node').image;
      expect(image).toMatch(/:v3\.27\.4$/);
      const calico = await client.get(TIGERA_STATUS, undefined, 'calico');
      expect(tigeraCondition(calico, 'Available')).toBe('True');
      expect(res.steps.find((s: any) => s.id === 'wait-rollout').summary).toMatch(/calico-node rendered at v3\.27\.4/);

      // Nothing the 3.27 operator cannot clear: no finalizer only v1.34 removes, no TigeraStatus only v1.34 updates.
      await new Promise((r) => setTimeout(r, 10_000));
      const statuses = await client.listAll(TIGERA_STATUS);
      const degraded = statuses
        .filter((s) => tigeraCondition(s, 'Degraded') === 'True')
        .map((s) => `${s.metadata.name}: ${s.status.conditions.find((c: any) => c.type === 'Degraded').message}`);
      expect(degraded, 'TigeraStatus Degraded after the downgrade').toEqual([]);
      const terminating = (await client.listAll(K.pod, { namespace: 'calico-system' })).filter((x) => x.metadata.deletionTimestamp).map((x) => x.metadata.name);
      expect(terminating).toEqual([]);
      const inst = await client.get(INSTALLATION, undefined, 'default');
      console.log(`3.27.4 Installation finalizers: ${inst.metadata.finalizers?.join(', ')}`);

      // Uninstalling afterwards as the 3.27 docs say (`kubectl delete -f custom-resources.yaml`) completes: the
      // v1.32 operator removes its own finalizer once calico-node's RBAC and the calico-apiserver namespace are gone
      // (it waits for the latter, so deleting the Installation alone waits for the APIServer too, as on any 3.27
      // cluster); a finalizer only v1.34 removes would keep it Terminating for ever.
      const deletedAt = Date.now();
      await kubectl(cluster, ['delete', '-f', fixturePath('3.27.4', 'custom-resources.yaml'), '--wait=false']);
      await waitCalicoUninstalled(client, { who: 'v1.32', deletedAt, timeoutMs: 300_000, state: uninstallState, cluster });
    },
    30 * 60_000,
  );
});
