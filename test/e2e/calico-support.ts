/** Helpers for e2e tests that run Calico's real programs (the Calico supervisor of the local cluster). */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import { crdResourceType } from '../../src/kube/discovery.js';
import type { KubeObject, ResourceType } from '../../src/kube/types.js';
import { CALICO_PROGRAMS_VERSION, ensureCalicoProgram } from '../../src/dev/local-cluster/calico-programs.js';
import { parseWideTable, runCalicoctl, waitApiServiceAvailable, waitOperator } from '../../src/dev/local-cluster/calico-tools.js';
import { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { afterAll, beforeAll, expect } from 'vitest';
import { applyFixture, calicoType, deleteNodes, kubeconfig, operatorType, resetCalico, runCli, testClient, type CliResult } from './helpers.js';
import { expectChurnSettledAndHeld, PodChurn, stopAllPodChurns } from './pod-churn.js';
import { expectPodAddressesHeld } from './pod-ip-support.js';
import { GC_GRACE_MS, restartAsDoctorSays } from './doctor-support.js';

function run(bin: string, args: string[], input?: string, env: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(bin, args, { env: { ...process.env, KUBECONFIG: kubeconfig(), ...env }, timeout: 120_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${path.basename(bin)} ${args.join(' ')} failed: ${stderr.trim() || err.message}`));
      else resolve(stdout);
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

/** The real calicoctl (kubernetes datastore, the test cluster) of a Calico tree (default: the one build that serves every Calico version). */
export function calicoctl(args: string[], input?: string, tree?: string): Promise<string> {
  return runCalicoctl(kubeconfig(), args, input, tree);
}

/** The real kubectl built with the control plane. */
export function kubectl(cluster: LocalCluster, args: string[]): Promise<string> {
  const st = cluster.readState();
  if (!st) throw new Error('the local cluster is not running');
  return run(path.join(st.binDir, 'kubectl'), args);
}

/** `calicoctl get ippool -o wide`, as rows keyed by pool name (column header -> value). */
export async function ippoolsWide(tree?: string): Promise<Record<string, Record<string, string>>> {
  return parseWideTable(await calicoctl(['get', 'ippool', '-o', 'wide'], undefined, tree));
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

/** Wait until the supervisor runs the Calico API server of `tree` (it follows the rendered calico-apiserver image). */
export async function waitApiServerTree(cluster: LocalCluster, client: KubeClient, tree: string, timeoutMs = 300_000): Promise<void> {
  await client.waitFor(
    `the Calico API server of ${tree}`,
    async () => {
      const st = cluster.calicoStatus();
      if (st?.apiserver?.error) throw new Error(`the supervisor cannot run the API server: ${st.apiserver.error}`);
      return st?.apiserver?.calico === tree && st.apiserver.pid ? true : undefined;
    },
    { timeoutMs, intervalMs: 500, state: async () => `the supervisor runs ${JSON.stringify(cluster.calicoStatus()?.apiserver ?? 'nothing')}` },
  );
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
    {
      timeoutMs,
      intervalMs: 1000,
      state: async () => `its conditions: ${JSON.stringify((await client.getOrUndefined(TIGERA_STATUS, undefined, name))?.status?.conditions ?? 'none')}`,
    },
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

/** What a test file's real programs are built from: operator tags and Calico trees (build-calico.sh pins). */
export interface RealCalicoBuilds {
  operators: string[];
  calico: string[];
  /** Calico trees whose node side (calico-node's start-up and tunnel allocator, the CNI plugin) runs per kwok node. */
  nodeSide?: string[];
}
const DEFAULT_BUILDS: RealCalicoBuilds = { operators: ['v1.32.10', 'v1.34.3'], calico: [CALICO_PROGRAMS_VERSION] };

/**
 * Registers the set-up every test file with Calico's real programs shares: the programs built (`builds`; cold
 * builds take minutes each, cached afterwards; the build script serialises them), Calico removed with no program of an earlier
 * run acting meanwhile, two kwok nodes named `<prefix>-node-N` for the rendered pods, the supervisor started; and
 * afterwards everything stopped and removed again. Returns the cluster and a getter for the connected client.
 */
export function withRealCalico(nodePrefix: string, builds: RealCalicoBuilds = DEFAULT_BUILDS): { cluster: LocalCluster; client: () => KubeClient } {
  const cluster = new LocalCluster({ name: process.env.CNI_REWIND_CLUSTER_NAME ?? 'e2e' });
  let client: KubeClient | undefined;
  beforeAll(async () => {
    for (const tag of builds.operators) await ensureCalicoProgram('operator', tag);
    for (const tag of builds.calico) await ensureCalicoProgram('calico', tag);
    for (const tag of builds.nodeSide ?? []) await ensureCalicoProgram('node-side', tag);
    client = await testClient();
    await cluster.stopCalico();
    await clearCalicoFinalizers(client);
    await resetCalico(client);
    await createFakeNodes(client, [{ name: `${nodePrefix}-node-1` }, { name: `${nodePrefix}-node-2` }]);
    await cluster.startCalico({ nodeSide: !!builds.nodeSide?.length });
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

/** No new address can come from the pool: disabled, or a node selector that selects no node. */
export const nonAllocating = (p: any): boolean => p?.spec?.disabled === true || p?.spec?.nodeSelector === '!all()';

/** Lines of the operator's log (the supervisor appends every run's output to `tigera-operator.log`). */
export function operatorLog(cluster: LocalCluster): string[] {
  const st = cluster.readState();
  if (!st) throw new Error('the local cluster is not running');
  const file = path.join(st.workDir, 'tigera-operator.log');
  return existsSync(file) ? readFileSync(file, 'utf8').split('\n') : [];
}

/** The installation controller logs this line (at info level) at the start of each reconcile of Installation default. */
const installationReconciles = (cluster: LocalCluster) =>
  operatorLog(cluster).filter((l) => l.includes('"logger":"controller_installation"') && l.includes('Reconciling Installation.operator.tigera.io')).length;

/**
 * Samples IPPool `name` every second for `durationMs` under the running operator and throws the moment it could
 * allocate again; the Installation is touched every `touchEveryMs` to force a reconcile. With `cluster`, each touch
 * waits until the operator logged a new reconcile of the Installation (its installation and ippool controllers
 * both watch it), and the operator process must stay the one running at the start (no exit, no restart by the
 * supervisor). Returns the pool states seen (with how often), the touches and the reconciles seen after them.
 */
export async function watchPoolNonAllocating(
  client: KubeClient,
  name: string,
  opts: { durationMs: number; touchEveryMs: number; since: number; cluster?: LocalCluster },
): Promise<{ seen: Map<string, number>; touches: number; reconciled: number }> {
  const pool = calicoType('ippools', 'IPPool');
  const installation = operatorType('installations', 'Installation');
  const seen = new Map<string, number>();
  const deadline = Date.now() + opts.durationMs;
  let nextTouch = Date.now() + opts.touchEveryMs;
  let touches = 0;
  let reconciled = 0;
  const pid = opts.cluster?.calicoStatus()?.operator?.pid;
  while (Date.now() < deadline) {
    const p = await client.get(pool, undefined, name);
    const key = JSON.stringify({ disabled: p.spec.disabled ?? false, nodeSelector: p.spec.nodeSelector });
    seen.set(key, (seen.get(key) ?? 0) + 1);
    if (!nonAllocating(p)) throw new Error(`${name} allocating again after ${((Date.now() - opts.since) / 1000).toFixed(0)} s: ${JSON.stringify(p.spec)}`);
    const op = opts.cluster?.calicoStatus()?.operator;
    if (opts.cluster && (op?.pid !== pid || op?.starts !== 1))
      throw new Error(`the operator did not keep running: was pid ${pid}, now ${JSON.stringify(op)} (${((Date.now() - opts.since) / 1000).toFixed(0)} s)`);
    if (Date.now() >= nextTouch) {
      const before = opts.cluster ? installationReconciles(opts.cluster) : 0;
      await client.mergePatch(installation, undefined, 'default', { metadata: { annotations: { 'cni-rewind.test/touch': String(++touches) } } });
      if (opts.cluster) {
        const c = opts.cluster;
        await client.waitFor('the operator to reconcile the touched Installation', async () => (installationReconciles(c) > before ? true : undefined), {
          timeoutMs: 60_000,
          intervalMs: 250,
        });
        reconciled++;
      }
      nextTouch += opts.touchEveryMs;
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
  return { seen, touches, reconciled };
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
 * The operator creates the Installation's pool through the v3 API and then marks it as its own (the managed-by label,
 * stored in the `projectcalico.org/metadata` annotation); the CNI plugin (and the IPAM driver) refuses to work until
 * ClusterInformation default says datastoreReady. Under load the marking can come a minute after the pool: a backup
 * taken before it holds the pool unmarked, and restoring that bundle is then a real change the operator undoes
 * (drift, exit 3), so the install counts as settled only once the pool is marked.
 */
export async function waitPoolAndDatastoreReady(client: KubeClient): Promise<void> {
  const read = async () => {
    const pool = await client.getOrUndefined(calicoType('ippools', 'IPPool'), undefined, 'default-ipv4-ippool');
    const ci = await client.getOrUndefined(calicoType('clusterinformations', 'ClusterInformation'), undefined, 'default');
    const marked =
      pool && JSON.parse(pool.metadata.annotations?.['projectcalico.org/metadata'] ?? '{}').labels?.['app.kubernetes.io/managed-by'] === 'tigera-operator';
    return { pool, ci, marked };
  };
  await client.waitFor(
    'default-ipv4-ippool marked by the operator and a ready datastore',
    async () => {
      const { marked, ci } = await read();
      return marked && ci?.spec?.datastoreReady === true ? true : undefined;
    },
    {
      timeoutMs: 240_000,
      intervalMs: 500,
      state: async () => {
        const { pool, ci, marked } = await read();
        return `pool ${pool ? (marked ? 'present, marked' : 'present, not marked by the operator yet') : 'absent'}, ClusterInformation ${ci ? `datastoreReady=${ci.spec?.datastoreReady}` : 'absent'}`;
      },
    },
  );
}

/** The user's second pool in the Installation, which takes the allocations while default-ipv4-ippool is stopped. */
export const NEW_POOL_ENTRY = {
  name: 'new-ipv4-pool',
  cidr: '10.100.0.0/16',
  blockSize: 26,
  encapsulation: 'VXLANCrossSubnet',
  natOutgoing: 'Enabled',
  nodeSelector: 'all()',
};

/** Wait until default-ipv4-ippool and new-ipv4-pool exist (written by the operator `who`). */
export async function waitBothPools(client: KubeClient, who: string): Promise<void> {
  const pool = calicoType('ippools', 'IPPool');
  await client.waitFor(
    `both pools written by ${who}`,
    async () =>
      (await client.getOrUndefined(pool, undefined, NEW_POOL_ENTRY.name)) && (await client.getOrUndefined(pool, undefined, 'default-ipv4-ippool'))
        ? true
        : undefined,
    { timeoutMs: 240_000, intervalMs: 500 },
  );
}

/**
 * The #9100 trap named before a change to `target` and the plan made: `doctor --target` finds
 * pool-disabled-will-be-reenabled with a fix that says `fixText` (3.28: nodeSelector "!all()"), `export` writes a bundle in `dir`, and
 * `plan --to` (no flag) exits 0. Returns the parsed plan and its file.
 */
export async function doctorExportPlan(dir: string, target: string, fixText = 'nodeSelector: "!all()"'): Promise<{ plan: any; planFile: string }> {
  const d = await runCli(['doctor', '--target', target, '-o', 'json']);
  const found = JSON.parse(d.stdout).findings.find((f: any) => f.id === 'pool-disabled-will-be-reenabled');
  expect(found, d.stdout + d.stderr).toBeDefined();
  expect(found.fix).toContain(fixText);
  const bundle = path.join(dir, 'bundle');
  const b = await runCli(['export', '--out', bundle]);
  expect(b.code, b.stderr).toBe(0);
  const planFile = path.join(dir, 'plan.yaml');
  const p = await runCli(['plan', '--to', target, '--bundle', bundle, '--no-disk-snapshots', '--out', planFile, '-o', 'json']);
  expect(p.code, p.stdout + p.stderr).toBe(0);
  return { plan: JSON.parse(p.stdout), planFile };
}

/**
 * withRealCalico for a file whose real Pods come and go through the node side (`builds.nodeSide`) in a namespace of
 * their own: a temporary directory for the plan's files, `startChurn` (6 pods on the two nodes, one create or delete
 * every 1.5 s: the node side runs one CNI call at a time), and after the file the churn stopped and its namespace
 * deleted before the supervisor stops, so the pods' DELs run.
 */
export function withRealCalicoChurn(prefix: string, builds: RealCalicoBuilds) {
  const real = withRealCalico(prefix, builds);
  const namespace = `pod-churn-${Date.now().toString(36)}`;
  const nodes = [`${prefix}-node-1`, `${prefix}-node-2`];
  let dir: string | undefined;
  beforeAll(() => void (dir = mkdtempSync(path.join(os.tmpdir(), `cnr-${prefix}-`))));
  const deleteNamespace = async () => real.client().delete(K.namespace, undefined, namespace);
  afterAll(async () => {
    await stopAllPodChurns();
    await deleteNamespace().catch(() => undefined); // also when the set-up failed before a client existed
  });
  const startChurn = () =>
    PodChurn.start(real.client(), real.cluster, { namespace, nodes, prefix: `${prefix}${Date.now().toString(36)}`, target: 6, intervalMs: 1500 });
  return { ...real, nodes, dir: () => dir!, startChurn };
}

/**
 * The end of a churn (stopped): every pod settled and held by its own handle, nothing released still held,
 * `calicoctl ipam check` clean (expectChurnSettledAndHeld), at least 6 pods addressed, each from `pool`, and no
 * address shared or free in IPAM among the churn's live pods and at least one of the operator's (kube-controllers).
 * `operatorPodsFromPool`: every other Calico address from `pool` too (false when another pool allocated meanwhile).
 * Returns the running pods' addresses.
 */
export async function expectChurnEndHeld(client: KubeClient, cluster: LocalCluster, churn: PodChurn, o: { pool: RegExp; operatorPodsFromPool: boolean }) {
  await expectChurnSettledAndHeld(client, cluster, churn);
  const counts = churn.counts();
  console.log(`pod churn: ${JSON.stringify(counts)}`);
  expect(counts.addressed).toBeGreaterThanOrEqual(6);
  expect([...churn.pods.values()].filter((p) => p.ip && !o.pool.test(p.ip)).map((p) => `${p.name} ${p.ip}`)).toEqual([]);
  const addrs = await expectPodAddressesHeld(client, churn.live().length + 1);
  if (o.operatorPodsFromPool) expect(addrs.filter((a) => a.fromCni && !o.pool.test(a.ip))).toEqual([]);
  return addrs;
}

/**
 * After `kubectl delete -f custom-resources.yaml` at `deletedAt`: waits up to `timeoutMs` for the operator `who` to
 * delete the Installation, then for calico-system and calico-apiserver to be gone, logging both times; a timeout
 * names `state()` (what is left and why). Still waiting after GC_GRACE_MS, it asks doctor as a user would
 * (restartAsDoctorSays).
 */
export async function waitCalicoUninstalled(
  client: KubeClient,
  o: { who: string; deletedAt: number; timeoutMs: number; state: () => Promise<string>; cluster: LocalCluster },
) {
  const since = () => ((Date.now() - o.deletedAt) / 1000).toFixed(1);
  const installation = operatorType('installations', 'Installation');
  let asked = false;
  const gone = async () => {
    if (!(await client.getOrUndefined(installation, undefined, 'default'))) return true;
    // Calico up to 3.27.4 shares a namespace's UID with its Profile: the collector may lose calico-apiserver's owner.
    if (!asked && Date.now() - o.deletedAt > GC_GRACE_MS) {
      asked = true;
      await restartAsDoctorSays(o.cluster, client, Date.now() - o.deletedAt);
    }
    return undefined;
  };
  await client.waitFor(`Installation default to be deleted by the ${o.who} operator`, gone, { timeoutMs: o.timeoutMs, intervalMs: 500, state: o.state });
  console.log(`kubectl delete -f custom-resources.yaml: Installation gone in ${since()} s`);
  const left = async () =>
    (await Promise.all(['calico-system', 'calico-apiserver'].map((ns) => client.getOrUndefined(K.namespace, undefined, ns)))).some(Boolean);
  const what = 'calico-system and calico-apiserver to be gone (nothing Terminating)';
  await client.waitFor(what, async () => ((await left()) ? undefined : true), { timeoutMs: 180_000, intervalMs: 1000, state: o.state });
  console.log(`calico-system and calico-apiserver gone ${since()} s after the delete`);
}
