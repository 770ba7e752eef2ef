/**
 * One upgrade or downgrade path on the real programs of both releases (issue 30's matrix, shortened): `cluster up
 * --calico FROM` (operator install, each release's own operator, API server, kube-controllers and node side), the
 * user's own state added (a pool the user stopped, outside the Installation; a GlobalNetworkPolicy; two pods addressed
 * by the CNI plugin), `export`, `plan --to TO`, `apply --yes`, then forced reconciles of the target operator. After
 * them: the stopped pool still stopped and the Installation's pool still allocating, the policy read by name with the
 * target's calicoctl, every TigeraStatus Available, every pod's address held by that pod, no "Cannot update an IP
 * pool not owned by the operator" in the operator's log since apply and no error line at all once it settled (but
 * EXPLAINED ones), and the release's custom resources deleted as `kubectl delete -f custom-resources.yaml` does with
 * Installation default gone afterwards (no operator finalizer left behind). Down from 3.32, a policy made between plan
 * and apply too, both stored under the target's names. Each path's row (path, strategy, result, seconds) is printed
 * and appended to `path-matrix.tsv` in the e2e cache, which the run writes into docs/calico-differences.md.
 *
 * Shortened from the issue's ten minutes of reconciles per path: RECONCILES touches over about a minute (the matrix
 * would otherwise take hours of CI); CNI_REWIND_MATRIX_RECONCILE_MINUTES=10 runs the ten minutes (docs/calico-differences.md).
 */
import { execFile } from 'node:child_process';
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/core/package-root.js';
import { calicoProgramsFor } from '../../src/dev/local-cluster/calico-programs.js';
import { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { buildCacheRoot } from '../../src/dev/local-cluster/paths.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject } from '../../src/kube/types.js';
import { calicoctl, clearCalicoFinalizers, waitTigeraStatusAvailable } from './calico-support.js';
import { calicoType, deleteNodes, explain, operatorType, resetCalico, runCli, testClient } from './helpers.js';
import { expectChurnSettledAndHeld, PodChurn, stopAllPodChurns } from './pod-churn.js';
import { expectPodAddressesHeld } from './pod-ip-support.js';
import { GC_GRACE_MS, restartAsDoctorSays } from './doctor-support.js';
import { errorMessages, profileSharesNamespaceUid, storedPolicyNames } from './path-matrix-reads.js';
import { leavesPolicyNaming } from '../../src/calico/policy-names.js';
import { compareVersions, operatorPoolBehaviour } from '../../src/calico/knowledge.js';
import { retryOnConflict } from '../../src/kube/conflict.js';
import { API_SERVER_IN_CALICO_SYSTEM } from '../../src/plan/apiserver-findings.js';

const run = promisify(execFile);
const CLUSTER_CLI = path.join(packageRoot(), 'dist', 'src', 'dev', 'local-cluster', 'cli.js');
const POOL = calicoType('ippools', 'IPPool');
const INSTALLATION = operatorType('installations', 'Installation');
const TIGERA_STATUS = operatorType('tigerastatuses', 'TigeraStatus');
const NOT_OWNED = 'Cannot update an IP pool not owned by the operator';
/** Reconcile touches (RECONCILE_GAP_MS apart) after apply before the operator's log must have no error line. */
const SETTLED_AFTER = 2;
/** The kinds the releases' custom-resources.yaml create (3.26-3.32), as plurals. */
const CUSTOM_RESOURCES = ['installations', 'apiservers', 'goldmanes', 'whiskers'];
const RECONCILE_GAP_MS = 10_000;
/** Touches (4 minutes) the operator may take to settle on a path whose v3 UIDs change (its informers list again). */
const UID_CHANGE_EXTRA_TOUCHES = 24;
/** Minutes of forced reconciles after apply: one by default (CI's budget), the ten when asked for by env. */
const RECONCILE_MINUTES = Number(process.env.CNI_REWIND_MATRIX_RECONCILE_MINUTES) || 1;
const RECONCILES = Math.max(SETTLED_AFTER + 1, Math.round((RECONCILE_MINUTES * 60_000) / RECONCILE_GAP_MS));
const NODE = 'local-node-1';
const CHURN_NAMESPACE = 'path-churn';
const CHURN_NODES = ['local-node-1', 'local-node-2'];

/** A namespaced default-tier policy the user makes between plan and apply. */
const LATE_POLICY = JSON.stringify({
  apiVersion: 'projectcalico.org/v3',
  kind: 'NetworkPolicy',
  metadata: { name: 'late-allow-dns', namespace: 'default' },
  spec: { selector: 'all()', types: ['Egress'], egress: [{ action: 'Allow', protocol: 'UDP', destination: { ports: [53] } }] },
});

export interface Path {
  from: string;
  to: string;
  /**
   * Run only when CNI_REWIND_MATRIX=all (then every path runs); otherwise reported as skipped, never as passed. CI's
   * 90 minutes hold ten of the fifteen paths: every operator generation's boundary at least once and each path that
   * shows a behaviour of its own (docs/calico-differences.md, "CI and the full matrix").
   */
  fullMatrixOnly?: true;
}

const FULL_MATRIX = process.env.CNI_REWIND_MATRIX === 'all';

const USER_POOL = JSON.stringify({
  apiVersion: 'projectcalico.org/v3',
  kind: 'IPPool',
  metadata: { name: 'user-stopped' },
  spec: { cidr: '10.200.0.0/16', blockSize: 26, ipipMode: 'Never', vxlanMode: 'Never', natOutgoing: false, disabled: true, nodeSelector: 'all()' },
});

/** The Installation entry stopped the operator's way (stopAPoolTheOperatorsWay adds the stop). */
const OPERATOR_STOPPED = { name: 'operator-stopped', cidr: '10.201.0.0/16', blockSize: 26, encapsulation: 'VXLAN', natOutgoing: 'Enabled' };

const POLICY = JSON.stringify({
  apiVersion: 'projectcalico.org/v3',
  kind: 'GlobalNetworkPolicy',
  metadata: { name: 'user-deny-metadata' },
  spec: { selector: 'all()', types: ['Egress'], egress: [{ action: 'Deny', destination: { nets: ['169.254.169.254/32'] } }] },
});

export function describePaths(paths: readonly Path[]): void {
  describe('upgrade and downgrade paths on the real programs of both releases', () => {
    const cluster = new LocalCluster({ name: process.env.CNI_REWIND_CLUSTER_NAME ?? 'e2e' });
    let client: KubeClient;
    let dir: string;

    const cleanUp = async () => {
      await stopAllPodChurns();
      for (const p of await client.listAll<KubeObject>(K.pod, { namespace: CHURN_NAMESPACE })) await client.delete(K.pod, CHURN_NAMESPACE, p.metadata.name!);
      await cluster.stopCalico();
      await clearCalicoFinalizers(client);
      await resetCalico(client);
      for (const p of await client.listAll<KubeObject>(K.pod, { namespace: 'default' })) await client.delete(K.pod, 'default', p.metadata.name!);
      await deleteNodes(client, 'local-node-');
    };
    beforeAll(async () => {
      client = await testClient();
      dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-paths-'));
      await cleanUp();
    }, 900_000);
    afterAll(async () => {
      if (client && (await cluster.isUp())) await cleanUp();
      client?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    }, 600_000);

    for (const p of paths) {
      const skipped = p.fullMatrixOnly && !FULL_MATRIX;
      (skipped ? it.skip : it)(
        `${p.from} -> ${p.to}${skipped ? ' (full matrix only: CNI_REWIND_MATRIX=all)' : ''}`,
        async () => {
          const started = Date.now();
          const fromTree = calicoProgramsFor(p.from)!;
          const toTree = calicoProgramsFor(p.to)!;
          await cleanUp();
          await run(process.execPath, [CLUSTER_CLI, 'up', '--calico', p.from], { timeout: 1_800_000, maxBuffer: 64 * 1024 * 1024 });

          // The user's own state: a stopped pool the Installation does not list, a policy, two pods on the CNI plugin.
          // calicoctl of the installed release writes them as that release writes them.
          await calicoctl(['apply', '-f', '-'], USER_POOL, fromTree);
          await calicoctl(['apply', '-f', '-'], POLICY, fromTree);
          for (const name of ['path-a', 'path-b'])
            await client.create(K.pod, {
              apiVersion: 'v1',
              kind: 'Pod',
              metadata: { name, namespace: 'default' },
              spec: { nodeName: NODE, containers: [{ name: 'c', image: 'nginx' }] },
            });
          await client.waitFor(
            'both pods addressed by the CNI plugin',
            async () => {
              const pods = await client.listAll<KubeObject>(K.pod, { namespace: 'default' });
              return pods.filter((x) => /^192\.168\./.test(x.status?.podIP ?? '')).length === 2 ? true : undefined;
            },
            { timeoutMs: 180_000, intervalMs: 500 },
          );
          await expectPodAddressesHeld(client, 2);
          // From 3.28 on (operator v1.34+ owns the Installation's pools): a pool stopped the operator's way too.
          const stoppedEntry = await stopAPoolTheOperatorsWay(client, p.from);
          const poolsBefore = await poolStates(client);

          const bundle = path.join(dir, `bundle-${p.from}-${p.to}`);
          const exp = await runCli(['export', '--out', bundle]);
          expect(exp.code, explain(exp)).toBe(0);
          const planFile = path.join(dir, `plan-${p.from}-${p.to}.json`);
          const planArgs = ['plan', '--to', p.to, '--bundle', bundle, '--no-disk-snapshots', '--out', planFile, '-o', 'json'];
          // exit 5 with the plan written: apply would refuse it (a requires-flag finding the test answers below).
          let plan = await runCli(planArgs);
          expect([0, 5], explain(plan)).toContain(plan.code);
          let planned = JSON.parse(plan.stdout);
          let consent: string[] = [];
          // A downgrade may need the user's consent (to lose what the older CRDs cannot hold; to keep one pool per family
          // in the Installation for 3.27's operator): given with the flag each refusal names, and named in the row.
          const refused = planned.findings.filter((f: any) => f.severity === 'error');
          const refusals: string[] = refused.map((f: any) => `${f.id}: ${(f.details ?? []).join('; ')}`);
          if (refusals.length) {
            const flags = [...new Set<string>(refused.map((f: any) => `--${f.flag}`))];
            expect(flags, `every refusal names its flag: ${JSON.stringify(refused)}`).not.toContain('--undefined');
            plan = await runCli([...planArgs, ...flags]);
            expect(plan.code, explain(plan)).toBe(0);
            planned = JSON.parse(plan.stdout);
            expect(
              planned.findings.filter((f: any) => f.severity === 'error'),
              `only refusals that ${flags.join(' ')} answer`,
            ).toEqual([]);
            consent = flags;
          }
          // Below 3.30 from 3.30+: the plan says Goldmane's and Whisker's workloads keep running (their kinds are the
          // custom-resources.yaml's, so every such install has them), as a matrix run saw them do.
          if (compareVersions(`v${p.from}`, 'v3.30.0') >= 0 && compareVersions(`v${p.to}`, 'v3.30.0') < 0) {
            const kept = planned.findings.filter((f: any) => f.id === 'crd-not-in-target' && /keep running/.test(f.plan)).flatMap((f: any) => f.objects);
            expect(kept, 'the plan names the workloads left running').toEqual(expect.arrayContaining(['Goldmane/default', 'Whisker/default']));
          }
          // Below 3.31 from 3.31+: the plan says v1.40's API server in calico-system is left running (checked below).
          const leavesApiServer =
            compareVersions(`v${p.from}`, API_SERVER_IN_CALICO_SYSTEM) >= 0 && compareVersions(`v${p.to}`, API_SERVER_IN_CALICO_SYSTEM) < 0;
          const saidLeft = planned.findings.some((f: any) => f.id === 'api-server-left-in-calico-system');
          expect(saidLeft, 'the plan names the API server left in calico-system').toBe(leavesApiServer);
          // Below 3.32 from 3.32 (plan step rename-policies-back): a default-tier policy made after the plan is renamed
          // back too, as the step reads the cluster, not the plan.
          const renames = leavesPolicyNaming(`v${p.from}`, `v${p.to}`);
          expect(planned.steps.map((s: { id: string }) => s.id).includes('rename-policies-back'), 'the plan renames policies back').toBe(renames);
          if (renames) await calicoctl(['apply', '-f', '-'], LATE_POLICY, fromTree);
          // Live IPAM churn through the whole apply and the reconciles: pods created and deleted on both nodes by the
          // real CNI plugin, judged once settled (no address lost, shared or leaked; `calicoctl ipam check` clean).
          const churn = await PodChurn.start(client, cluster, {
            namespace: CHURN_NAMESPACE,
            nodes: CHURN_NODES,
            prefix: `pc${Date.now().toString(36)}`,
            target: 4,
            intervalMs: 1500,
          });
          const uidsBefore = await profileSharesNamespaceUid(client);
          const logStart = operatorLog(cluster).length;
          const apply = await runCli(['apply', planFile, '--yes'], { timeoutMs: 1_200_000 });
          expect(apply.code, explain(apply)).toBe(0);
          const applied = Date.now();

          // The target operator reconciles again and again: nothing it does may undo the user's state.
          // Where the plan says the v3 UIDs change, the operator's cached v3 objects keep the old API server's UIDs until
          // its informers list again, and its IPPool updates fail meanwhile ("Precondition failed: UID in precondition";
          // 40 s and more under CI's load, a fresh-clone rehearsal): it is settled there once a whole gap passed without
          // an error line, within UID_CHANGE_EXTRA_TOUCHES more touches, and must then stay quiet as long as elsewhere.
          const uidsChangeSaid = planned.findings.some((f: any) => f.id === 'v3-uids-change');
          let settledAt = Infinity;
          let quiet = 0;
          for (let i = 0; i < RECONCILES + (uidsChangeSaid ? UID_CHANGE_EXTRA_TOUCHES : 0) && quiet < RECONCILES - SETTLED_AFTER; i++) {
            // The first touches meet the rollout's tail (the API server replaced, informers re-listing); from here on a
            // settled operator has nothing to fail at.
            if (i >= SETTLED_AFTER && (settledAt === Infinity || uidsChangeSaid)) {
              const lastGap = errorMessages(operatorLog(cluster).slice(logStart), Date.now() - RECONCILE_GAP_MS);
              // One quiet gap is not settled there: controller-runtime's backoff spaces a failing reconcile's retries
              // beyond a gap (CI, stop 46: an error again after one quiet gap). An error restarts the quiet window.
              if (!uidsChangeSaid || (lastGap.size === 0 && settledAt === Infinity)) settledAt = Date.now();
              else if (lastGap.size > 0) [settledAt, quiet] = [Infinity, 0];
            }
            await client.mergePatch(INSTALLATION, undefined, 'default', { metadata: { annotations: { 'cni-rewind.test/touch': String(i) } } });
            await new Promise((r) => setTimeout(r, RECONCILE_GAP_MS));
            expect(await poolStates(client), `after reconcile ${i + 1}`).toEqual(poolsBefore);
            if (stoppedEntry) expect(await operatorStoppedPool(client), `${OPERATOR_STOPPED.name} after reconcile ${i + 1}`).toEqual({ stopped: true });
            if (settledAt !== Infinity) quiet++;
          }
          expect(settledAt, 'the operator settles (a whole gap without an error line)').toBeLessThan(Infinity);
          if (uidsChangeSaid) console.log(`operator settled ${Math.round((settledAt - applied) / 1000)} s after apply (v3 UIDs changed)`);
          await churn.stop();
          await expectChurnSettledAndHeld(client, cluster, churn);
          // Nothing ever allocated from the stopped pool: IPAM holds no block of its CIDR.
          const blocks = await client.listAll<KubeObject>(calicoType('ipamblocks', 'IPAMBlock'));
          expect(blocks.map((b) => String(b.spec?.cidr)).filter((c) => c.startsWith('10.201.'))).toEqual([]);
          const churned = churn.counts();
          expect(churned.addressed, JSON.stringify(churned)).toBeGreaterThanOrEqual(4);
          console.log(`pod churn through apply and reconciles: ${JSON.stringify(churned)}`);
          for (const ts of await client.listAll<KubeObject>(TIGERA_STATUS)) await waitTigeraStatusAvailable(client, ts.metadata.name!, 180_000);
          // The plan says when the real API servers of the two releases give v3 objects other UIDs (read once the target's
          // serves): the garbage collector's graph is wrong until kube-controller-manager restarts (judged at the deletion).
          const uidsChange = planned.findings.some((f: any) => f.id === 'v3-uids-change');
          // Not where this cluster serves a release with another's API server (3.27.4 with 3.28.1's, calico-programs.ts).
          if (fromTree !== `v${p.from}` || toTree !== `v${p.to}`) console.log(`v3 UIDs not judged: API servers ${fromTree} -> ${toTree}`);
          else if (!uidsChange) expect(await profileSharesNamespaceUid(client), 'v3 UIDs kept, as the plan says').toBe(uidsBefore);
          else
            await client.waitFor(
              'the v3 UIDs to change, as the plan says',
              async () => ((await profileSharesNamespaceUid(client)) !== uidsBefore ? true : undefined),
              { timeoutMs: 120_000, intervalMs: 2000 },
            );
          // What that finding says, as the real operators leave it: the target's API server and the newer one beside it.
          if (leavesApiServer) {
            expect(await client.getOrUndefined(K.deployment, 'calico-apiserver', 'calico-apiserver'), "the target's API server").toBeDefined();
            expect(await client.getOrUndefined(K.deployment, 'calico-system', 'calico-apiserver'), 'the newer one, left').toBeDefined();
          }
          // Read by name with the target's calicoctl: below 3.32 that looks up default.<name> (names.TieredPolicyName).
          expect(await calicoctl(['get', 'globalnetworkpolicy', 'user-deny-metadata', '-o', 'yaml'], undefined, toTree)).toContain('user-deny-metadata');
          if (renames) {
            expect(await calicoctl(['get', 'networkpolicy', '-n', 'default', 'late-allow-dns', '-o', 'yaml'], undefined, toTree)).toContain('late-allow-dns');
            const stored = await storedPolicyNames(client);
            expect(stored, JSON.stringify(stored)).toEqual(['default.user-deny-metadata', 'default/default.late-allow-dns']);
          }
          await expectPodAddressesHeld(client, 2);
          const since = operatorLog(cluster).slice(logStart);
          expect(since.split('\n').filter((l) => l.includes(NOT_OWNED))).toEqual([]);
          const errors = errorMessages(since);
          const settledErrors = errorMessages(since, settledAt);
          expect(Object.fromEntries(settledErrors), `operator errors once settled: ${JSON.stringify(Object.fromEntries(settledErrors))}`).toEqual({});

          // No operator finalizer left behind: the custom resources can be deleted as the incident did (`kubectl delete
          // -f custom-resources.yaml`). All of them: from 3.30 the operator keeps a finalizer on the Installation while
          // its APIServer, Goldmane or Whisker exists (MaintainInstallationFinalizer), on a fresh install too.
          for (const plural of CUSTOM_RESOURCES) await client.delete(operatorType(plural, plural), undefined, 'default');
          // Touched every RECONCILE_GAP_MS while it waits, as during the reconciles above: operator v1.32 clears its
          // finalizer only once the calico-apiserver namespace is gone and watches no namespace, so on its own it sees
          // that at its periodic reconcile, every 5 minutes (core_controller.go:900-908, utils.PeriodicReconcileTime), on
          // a fresh 3.27 install too. Any finalizer nothing will clear still fails here.
          // Without the restart the plan asks for (v3-uids-change), or on a release up to 3.27.4 (its Profiles share their
          // namespace's UID), the deletion may hang on the namespace the collector lost: doctor must then name it, and
          // its fix, the restart, end the hang.
          let touched = 0;
          let doctorSaid = '';
          const deletedAt = Date.now();
          await client.waitFor(
            'Installation default to be deleted',
            async () => {
              if (!(await client.getOrUndefined(INSTALLATION, undefined, 'default'))) return true;
              if (!doctorSaid && Date.now() - deletedAt > GC_GRACE_MS) {
                doctorSaid = (await restartAsDoctorSays(cluster, client, Date.now() - deletedAt)) ?? 'nothing: calico-apiserver is gone or going';
              }
              if (Date.now() - touched >= RECONCILE_GAP_MS) {
                touched = Date.now();
                await client
                  .mergePatch(INSTALLATION, undefined, 'default', { metadata: { annotations: { 'cni-rewind.test/touch': `deleting-${touched}` } } })
                  .catch(() => undefined);
              }
              return undefined;
            },
            {
              timeoutMs: 240_000,
              intervalMs: 1000,
              state: async () => JSON.stringify((await client.getOrUndefined(INSTALLATION, undefined, 'default'))?.metadata?.finalizers ?? []),
            },
          );

          const row = [
            `${p.from} -> ${p.to}`,
            planned.strategy,
            (refusals.length ? `passed with ${consent.join(' ')} (${refusals.join(', ')})` : 'passed') +
              (RECONCILE_MINUTES === 1 ? '' : `, ${RECONCILE_MINUTES} min of reconciles`),
            ((Date.now() - started) / 1000).toFixed(0),
            ((applied - started) / 1000).toFixed(0),
            String([...errors.values()].reduce((a, b) => a + b, 0)),
          ].join('\t');
          console.log(`path matrix row: ${row}`);
          // Those before the window are the rollout's own (informers while the API server restarts, writes the old API
          // server could not take): listed so a run can be read, judged only once settled (above).
          console.log(`operator errors since apply, by message: ${JSON.stringify(Object.fromEntries(errors))}`);
          appendFileSync(path.join(buildCacheRoot(), 'path-matrix.tsv'), `${new Date().toISOString()}\t${row}\n`);
        },
        1_800_000,
      );
    }
  });
}

/**
 * Each pool's allocating state as the user sees it: disabled, and the node selector that can stop it too. The pool
 * stopped the operator's way is judged apart (operatorStoppedPool): its stop changes form between operators.
 */
async function poolStates(client: KubeClient): Promise<Record<string, { disabled: boolean; nodeSelector: string }>> {
  const out: Record<string, { disabled: boolean; nodeSelector: string }> = {};
  for (const p of await client.listAll<KubeObject>(POOL))
    if (p.metadata.name !== OPERATOR_STOPPED.name)
      out[p.metadata.name!] = { disabled: p.spec?.disabled === true, nodeSelector: String(p.spec?.nodeSelector ?? 'all()') };
  return out;
}

/**
 * A second Installation entry, stopped as that release's operator documents it, in the form the product's operator
 * model names (operatorPoolBehaviour: `nodeSelector: "!all()"` for 3.28, `disableNewAllocations: true` from 3.29).
 * Below 3.28 the operator does not manage pools after install and allows one per family, so there is none
 * (undefined). Waits for the operator's pool.
 */
async function stopAPoolTheOperatorsWay(client: KubeClient, from: string): Promise<object | undefined> {
  const stop = operatorPoolBehaviour(`v${from}`).stopAllocations;
  if (!stop) return undefined;
  const entry = { ...OPERATOR_STOPPED, [stop.field]: stop.value };
  // The operator writes the Installation too (its status, defaults): read again when it did between our read and write.
  await retryOnConflict(async () => {
    const inst = await client.get<KubeObject>(INSTALLATION, undefined, 'default');
    const pools = [...(inst.spec?.calicoNetwork?.ipPools ?? []), entry];
    await client.mergePatch(INSTALLATION, undefined, 'default', {
      metadata: { resourceVersion: inst.metadata.resourceVersion },
      spec: { calicoNetwork: { ipPools: pools } },
    });
  });
  await client.waitFor(
    `the operator to make pool ${OPERATOR_STOPPED.name}, stopped`,
    async () => ((await operatorStoppedPool(client)).stopped ? true : undefined),
    { timeoutMs: 180_000, intervalMs: 1000, state: async () => JSON.stringify(await operatorStoppedPool(client)) },
  );
  return entry;
}

/** Whether the pool stopped the operator's way is still stopped, in either form; a missing pool is not. */
async function operatorStoppedPool(client: KubeClient): Promise<{ stopped: boolean; missing?: true }> {
  const p = await client.getOrUndefined<KubeObject>(POOL, undefined, OPERATOR_STOPPED.name);
  if (!p) return { stopped: false, missing: true };
  return { stopped: p.spec?.disabled === true || p.spec?.nodeSelector === '!all()' };
}

function operatorLog(cluster: LocalCluster): string {
  try {
    return readFileSync(path.join(cluster.readState()!.workDir, 'tigera-operator.log'), 'utf8');
  } catch {
    return '';
  }
}
