/** Helpers for e2e tests that run Calico's real programs (the Calico supervisor of the local cluster). */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import { crdResourceType } from '../../src/kube/discovery.js';
import type { KubeObject, ResourceType } from '../../src/kube/types.js';
import { CALICO_PROGRAMS_VERSION, ensureCalicoProgram } from '../../src/dev/local-cluster/calico-programs.js';
import { parseWideTable, runCalicoctl, waitApiServiceAvailable, waitOperator } from '../../src/dev/local-cluster/calico-tools.js';
import { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { afterAll, beforeAll } from 'vitest';
import { applyFixture, calicoType, deleteNodes, kubeconfig, operatorType, resetCalico, runCli, testClient, type CliResult } from './helpers.js';

function run(bin: string, args: string[], input?: string, env: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(bin, args, { env: { ...process.env, KUBECONFIG: kubeconfig(), ...env }, timeout: 120_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${path.basename(bin)} ${args.join(' ')} failed: ${stderr.trim() || err.message}`));
      else resolve(stdout);
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

/** The real calicoctl (kubernetes datastore, the test cluster); the one build serves every Calico version. */
export function calicoctl(args: string[], input?: string): Promise<string> {
  return runCalicoctl(kubeconfig(), args, input);
}

/** The real kubectl built with the control plane. */
export function kubectl(cluster: LocalCluster, args: string[]): Promise<string> {
  const st = cluster.readState();
  if (!st) throw new Error('the local cluster is not running');
  return run(path.join(st.binDir, 'kubectl'), args);
}

/** `calicoctl get ippool -o wide`, as rows keyed by pool name (column header -> value). */
export async function ippoolsWide(): Promise<Record<string, Record<string, string>>> {
  return parseWideTable(await calicoctl(['get', 'ippool', '-o', 'wide']));
}

export { waitApiServiceAvailable, waitOperator };

/** `apply PLAN --yes -o json`, its result parsed (undefined when it printed none) and each step's outcome and time logged. */
export async function applyLogged(plan: string, label: string): Promise<CliResult & { res: any }> {
  const started = Date.now();
  const r = await runCli(['apply', plan, '--yes', '-o', 'json']);
  let res: any;
  try {
    res = JSON.parse(r.stdout);
  } catch {
    res = undefined;
  }
  const steps = res?.steps?.map((s: any) => `${s.id} ${s.status} ${(s.ms / 1000).toFixed(1)}s`).join(', ');
  console.log(`${label}: exit ${r.code} in ${((Date.now() - started) / 1000).toFixed(1)} s; ${steps}`);
  return { ...r, res };
}

const TIGERA_STATUS = operatorType('tigerastatuses', 'TigeraStatus');

/** The status of one condition of a TigeraStatus ('True', 'False', or undefined). */
export const tigeraCondition = (ts: KubeObject | undefined, type: string): string | undefined =>
  ts?.status?.conditions?.find((c: any) => c.type === type)?.status;

/** Wait until TigeraStatus `name` says Available and not Degraded; returns it. */
export async function waitTigeraStatusAvailable(client: KubeClient, name: string, timeoutMs = 300_000): Promise<KubeObject> {
  return client.waitFor(
    `TigeraStatus ${name} Available`,
    async () => {
      const ts = await client.getOrUndefined(TIGERA_STATUS, undefined, name);
      return tigeraCondition(ts, 'Available') === 'True' && tigeraCondition(ts, 'Degraded') !== 'True' ? ts : undefined;
    },
    { timeoutMs, intervalMs: 1000 },
  );
}

/**
 * A real operator leaves finalizers (on the Installation and APIServer, and `tigera.io/cni-protector` on the CNI
 * plugin's ServiceAccount and cluster RBAC) that only it removes, and only while it runs and uninstalls. With the
 * operator stopped, they would keep the CRDs and calico-system Terminating for ever: clear them (and remove the
 * operator's APIService) so the next test file starts clean.
 */
export async function clearCalicoFinalizers(client: KubeClient): Promise<number> {
  const targets: [ResourceType, string | undefined, string][] = [];
  for (const crd of (await client.listAll(K.crd)).filter((c) => c.spec.group === 'operator.tigera.io')) {
    const t = crdResourceType(crd);
    for (const o of await client.listAll(t)) targets.push([t, o.metadata.namespace, o.metadata.name]);
  }
  for (const ns of ['calico-system', 'calico-apiserver', 'tigera-operator']) {
    for (const o of await client.listAll(K.serviceAccount, { namespace: ns })) targets.push([K.serviceAccount, ns, o.metadata.name]);
  }
  for (const r of [K.clusterRole, K.clusterRoleBinding]) {
    for (const o of await client.listAll(r)) if (/calico|tigera/.test(o.metadata.name)) targets.push([r, undefined, o.metadata.name]);
  }
  let cleared = 0;
  for (const [t, ns, name] of targets) {
    const o = await client.getOrUndefined(t, ns, name);
    if (!o?.metadata.finalizers?.length) continue;
    await client.mergePatch(t, ns, name, { metadata: { finalizers: null } });
    cleared++;
  }
  // The operator's APIService would outlive its Service and make discovery of projectcalico.org/v3 fail.
  await client.request('DELETE', '/apis/apiregistration.k8s.io/v1/apiservices/v3.projectcalico.org').catch(() => undefined);
  return cleared;
}

/**
 * The incident's starting point with the real programs: Calico 3.27.4 installed as its docs say (tigera-operator.yaml,
 * then custom-resources.yaml with default-ipv4-ippool listed) under the real v1.32.10 operator, the v3 API served,
 * and the user's pool migration done: new-ipv4-pool created and default-ipv4-ippool disabled (through calicoctl,
 * as calico-node would have created the default pool from the Installation, defaults applied).
 */
export async function installIncident327(client: KubeClient, cluster: LocalCluster): Promise<void> {
  await applyFixture(client, '3.27.4', 'tigera-operator.yaml');
  await applyFixture(client, '3.27.4', 'custom-resources.yaml');
  await waitOperator(cluster, 'v1.32.10');
  await waitApiServiceAvailable(client, 240_000);
  const pool = (name: string, cidr: string) =>
    JSON.stringify({
      apiVersion: 'projectcalico.org/v3',
      kind: 'IPPool',
      metadata: { name },
      spec: { cidr, blockSize: 26, ipipMode: 'Never', vxlanMode: 'CrossSubnet', natOutgoing: true, nodeSelector: 'all()' },
    });
  await calicoctl(['create', '-f', '-'], pool('default-ipv4-ippool', '192.168.0.0/16'));
  await calicoctl(['create', '-f', '-'], pool('new-ipv4-pool', '10.100.0.0/16'));
  await calicoctl(['patch', 'ippool', 'default-ipv4-ippool', '-p', '{"spec":{"disabled":true}}']);
}

/**
 * Registers the set-up every test file with Calico's real programs shares: the programs built (cold builds take
 * minutes each, cached afterwards; the build script serialises them), Calico removed with no program of an earlier
 * run acting meanwhile, two kwok nodes named `<prefix>-node-N` for the rendered pods, the supervisor started; and
 * afterwards everything stopped and removed again. Returns the cluster and a getter for the connected client.
 */
export function withRealCalico(nodePrefix: string): { cluster: LocalCluster; client: () => KubeClient } {
  const cluster = new LocalCluster({ name: process.env.CNI_REWIND_CLUSTER_NAME ?? 'e2e' });
  let client: KubeClient | undefined;
  beforeAll(async () => {
    await ensureCalicoProgram('operator', 'v1.32.10');
    await ensureCalicoProgram('operator', 'v1.34.3');
    await ensureCalicoProgram('calico', CALICO_PROGRAMS_VERSION);
    client = await testClient();
    await cluster.stopCalico();
    await clearCalicoFinalizers(client);
    await resetCalico(client);
    await createFakeNodes(client, [{ name: `${nodePrefix}-node-1` }, { name: `${nodePrefix}-node-2` }]);
    await cluster.startCalico();
  }, 60 * 60_000);
  afterAll(async () => {
    await cluster.stopCalico();
    if (client) {
      await clearCalicoFinalizers(client);
      await resetCalico(client);
      await deleteNodes(client, `${nodePrefix}-`);
      client.close();
    }
  }, 600_000);
  return {
    cluster,
    client: () => {
      if (!client) throw new Error('the real-Calico set-up has not run');
      return client;
    },
  };
}

/** Calico 3.28.1 installed as its docs say under the real v1.34.3 operator: the v3 API served, TigeraStatus calico Available. */
export async function installReal328(client: KubeClient, cluster: LocalCluster): Promise<void> {
  await applyFixture(client, '3.28.1', 'tigera-operator.yaml');
  await applyFixture(client, '3.28.1', 'custom-resources.yaml');
  await waitOperator(cluster, 'v1.34.3');
  await waitApiServiceAvailable(client, 240_000);
  await waitTigeraStatusAvailable(client, 'calico');
}

/**
 * The operator creates the Installation's pool through the v3 API; the CNI plugin (and the IPAM driver) refuses to
 * work until ClusterInformation default says datastoreReady.
 */
export async function waitPoolAndDatastoreReady(client: KubeClient): Promise<void> {
  await client.waitFor(
    'default-ipv4-ippool and a ready datastore',
    async () => {
      const pool = await client.getOrUndefined(calicoType('ippools', 'IPPool'), undefined, 'default-ipv4-ippool');
      const ci = await client.getOrUndefined(calicoType('clusterinformations', 'ClusterInformation'), undefined, 'default');
      return pool && ci?.spec?.datastoreReady === true ? true : undefined;
    },
    { timeoutMs: 240_000, intervalMs: 500 },
  );
}
