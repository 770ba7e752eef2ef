/**
 * plan + apply with Calico's real programs: Calico 3.28.1 installed under the real v1.34.3 operator with a realistic
 * population and real allocations (the IPAM driver: libcalico-go's IPAM client, as the CNI plugin calls it),
 * downgraded to 3.27.4 in place, so the real v1.32.10 operator ends up running Calico. Once without interruption
 * (while it holds the lock a second apply is refused), once SIGKILLed after every step and resumed (starting by
 * breaking a stale lock): both end with v1.32.10 running, its own TigeraStatus calico Available written after it
 * started, calico-node at v3.27.4, the same Calico state and `calicoctl ipam check` finding what it found before.
 * Every allocation has its running Pod object (podsForPopulation, podsForDriverAllocations), so each apply also ends
 * with every pod's address held in IPAM by that pod (expectPodAddressesHeld) and the check finding no leak.
 * Killing at every step costs one CLI start per step on top of one apply (the figures are in the report). The plan
 * and the verify refusal change nothing, so the operator plays no part in them; they run first, on 3.28.1.
 */
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Journal, journalPathFor } from '../../src/apply/journal.js';
import { LOCK_NAME, LOCK_NAMESPACE } from '../../src/apply/lock.js';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { crdResourceType } from '../../src/kube/discovery.js';
import type { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { releasesDir } from '../support/releases.js';
import { fixtureObjects, operatorType, runCli } from './helpers.js';
import { waitOperator, withRealCalico } from './calico-support.js';
import { expectIpamAsBefore, heldByLog, installPopulatedReal328, ipamCheck, readIpam, type IpamCheck, type IpamState } from './ipam-support.js';
import { DRIVER_NS, podsForDriverAllocations } from './driver-pods.js';
import { podsForPopulation, populationPods } from './population-pods.js';
import { expectPodAddressesHeld } from './pod-ip-support.js';
import { applyKilledAtEachStep, calicoSnapshot, expectDowngradedTo327, snapshotDifferences, installCalico328 } from './plan-support.js';
import type { Population } from './population.js';

const fixtures = releasesDir();
const NODES = ['fpa-node-1', 'fpa-node-2'];
const TIGERA_STATUS = operatorType('tigerastatuses', 'TigeraStatus');

/**
 * The real operator `tag` runs Calico: calico-node rendered at `calicoTag` and TigeraStatus calico Available (not
 * Progressing, not Degraded); with `fresh`, Available since after the operator started (apply deletes the old
 * operator's report while no operator runs, so the one seen is the target's own).
 */
async function expectRealOperatorRuns(client: KubeClient, cluster: LocalCluster, tag: string, calicoTag: string, fresh: boolean): Promise<void> {
  const st = await waitOperator(cluster, tag, 60_000);
  const startedAt = Date.parse(st.operator!.startedAt!);
  let last = '';
  await client
    .waitFor(
      `operator ${tag} to run Calico ${calicoTag}`,
      async () => {
        const ts = await client.getOrUndefined(TIGERA_STATUS, undefined, 'calico');
        const cond = (type: string) => ts?.status?.conditions?.find((c: any) => c.type === type);
        const node = await client.getOrUndefined(K.daemonSet, 'calico-system', 'calico-node');
        const image = node?.spec.template.spec.containers.find((c: any) => c.name === 'calico-node').image;
        last = `calico-node ${image}; TigeraStatus calico ${JSON.stringify(ts?.status?.conditions ?? null)}; operator started ${st.operator!.startedAt}`;
        // Kubernetes times have whole seconds.
        const since = Date.parse(cond('Available')?.lastTransitionTime ?? '');
        return image?.endsWith(`:${calicoTag}`) &&
          cond('Available')?.status === 'True' &&
          cond('Progressing')?.status !== 'True' &&
          cond('Degraded')?.status !== 'True' &&
          (!fresh || since >= startedAt - 1000)
          ? true
          : undefined;
      },
      { timeoutMs: 300_000, intervalMs: 1000 },
    )
    .catch((err) => {
      throw new Error(`${(err as Error).message}: ${last}`, { cause: err });
    });
}

describe('plan and apply: 3.28.1 -> 3.27.4 on a real cluster', () => {
  const real = withRealCalico('fpa');
  let client: KubeClient;
  let cluster: LocalCluster;
  let dir: string;
  let population: Population;
  let ipamBefore: IpamState;
  let checkBefore: IpamCheck;
  /** How many pods this file made with Calico addresses (the population's and the IPAM driver's allocations). */
  let podCount = 0;
  let uninterrupted: Awaited<ReturnType<typeof calicoSnapshot>>;

  /** A fresh bundle and plan for the current state (3.28.1 installed). */
  async function exportAndPlan(name: string, extra: string[] = []): Promise<{ bundle: string; plan: string; out: any }> {
    const bundle = path.join(dir, `bundle-${name}`);
    const e = await runCli(['export', '--out', bundle]);
    expect(e.code, e.stderr).toBe(0);
    const plan = path.join(dir, `plan-${name}.yaml`);
    const p = await runCli([
      'plan',
      '--to',
      '3.27.4',
      '--manifests',
      fixtures,
      '--bundle',
      bundle,
      '--no-disk-snapshots',
      '--out',
      plan,
      '-o',
      'json',
      ...extra,
    ]);
    expect(p.code, p.stderr).toBe(0);
    return { bundle, plan, out: JSON.parse(p.stdout) };
  }

  beforeAll(async () => {
    client = real.client();
    cluster = real.cluster;
    dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-plan-e2e-'));
    await client.delete(K.lease, LOCK_NAMESPACE, LOCK_NAME);
    const installed = await installPopulatedReal328(client, cluster, { prefix: 'fpa', nodes: NODES, logFile: path.join(dir, 'driver.jsonl') });
    population = installed.population;
    // The pods behind the population's and the driver's allocations, running with those addresses, as the CNI
    // plugin leaves them: the apply must keep each address held by its pod.
    await podsForPopulation(client, population);
    await podsForDriverAllocations(client, installed.events, DRIVER_NS);
    podCount = populationPods(population).length + heldByLog(installed.events).size;
    expect(podCount, 'pods with Calico addresses').toBeGreaterThan(0);
    await expectPodAddressesHeld(client, podCount);
    ipamBefore = await readIpam(client);
    checkBefore = await ipamCheck();
    expect(checkBefore.leaked, checkBefore.text).toBe(0);
  }, 20 * 60_000);

  afterAll(async () => {
    for (const ns of [population?.namespace, DRIVER_NS]) if (ns) await client?.delete(K.namespace, undefined, ns).catch(() => undefined);
  });

  it('plan --to 3.27.4 reports the Installation fields 3.27 lacks, with what it will do, and changes nothing', async () => {
    const before = await calicoSnapshot(client);
    const { out, bundle } = await exportAndPlan('plan-only');
    expect(out.current).toMatchObject({ installType: 'operator', version: 'v3.28.1' });
    expect(out.target).toMatchObject({ version: 'v3.27.4', operatorImage: 'quay.io/tigera/operator:v1.32.10' });
    expect(out.direction).toBe('downgrade');
    const f = out.findings.find((x: any) => x.id === 'installation-fields-unknown-to-target');
    expect(f.action).toBe('transform');
    expect(f.objects).toEqual(['Installation/default']);
    expect(f.details.join('\n')).toMatch(/spec\.calicoNetwork\.ipPools\[0\]\.name/);
    expect(f.details.join('\n')).toMatch(/spec\.calicoNetwork\.ipPools\[0\]\.allowedUses/);
    expect(out.bundle.path).toBe(path.resolve(bundle));
    expect(out.bundle.manifestSha256).toMatch(/^[0-9a-f]{64}$/);
    // The real v1.34.3 put its installation- and apiserver-controller finalizers on the Installation; v1.32 never clears them.
    expect(out.steps.map((s: any) => s.id)).toEqual([
      'preflight',
      'pause-operator',
      'apply-crds',
      'apply-operator',
      'remove-operator-leftovers',
      'transform-installation',
      'resume-operator',
      'wait-rollout',
      'verify-data',
    ]);
    const human = await runCli(['plan', '--to', '3.27.4', '--manifests', fixtures, '--bundle', bundle, '--no-disk-snapshots']);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toContain('ipPools[0].allowedUses (unknown to v3.27.4)');
    expect(human.stdout).toMatch(/plan \(transform\): remove these fields/);
    // Without --no-disk-snapshots the export-only bundle is refused (exit 5) and says why.
    const strict = await runCli(['plan', '--to', '3.27.4', '--manifests', fixtures, '--bundle', bundle]);
    expect(strict.code).toBe(5);
    expect(strict.stderr).toMatch(/disk-snapshots: no completed disk snapshot/);
    expect(snapshotDifferences(await calicoSnapshot(client), before).join('\n')).toBe('');
  });

  it('refuses (exit 5) a plan whose bundle fails verify, before changing anything', async () => {
    const { plan, bundle } = await exportAndPlan('tampered');
    const pools = path.join(bundle, 'resources', 'crd.projectcalico.org', 'IPPool', '_cluster');
    const f = path.join(pools, readdirSync(pools)[0]!);
    writeFileSync(f, readFileSync(f, 'utf8').replace(/cidr: .*/, 'cidr: 10.99.0.0/16'));
    const before = await calicoSnapshot(client);
    const r = await runCli(['apply', plan, '--yes']);
    expect(r.code).toBe(5);
    expect(r.stderr).toMatch(/fails verify/);
    expect(snapshotDifferences(await calicoSnapshot(client), before).join('\n')).toBe('');
    const bad = await runCli(['apply', path.join(dir, 'nope.yaml'), '--yes']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/no such plan file/);
  });

  it(
    'apply --yes ends with the 3.27.4 CRDs, the real operator v1.32.10 running Calico, every pool/IPAM object/policy unchanged; a concurrent apply is refused',
    async () => {
      const before = await calicoSnapshot(client);
      const { plan, bundle, out } = await exportAndPlan('inplace');
      const other = await exportAndPlan('lock-b');
      const started = Date.now();
      const first = runCli(['apply', plan, '--yes', '-o', 'json']);
      await client.waitFor(
        'the first apply to hold the lock',
        async () => ((await client.getOrUndefined(K.lease, LOCK_NAMESPACE, LOCK_NAME))?.spec?.holderIdentity?.includes(out.id) ? true : undefined),
        { timeoutMs: 60_000, intervalMs: 100 },
      );
      const second = await runCli(['apply', other.plan, '--yes']);
      expect(second.code).toBe(5);
      expect(second.stderr).toMatch(/another apply is running against this cluster: lock held by .*\/\d+\/plan-/);
      expect(second.stderr).toMatch(/held for \d+s/);
      const r = await first;
      expect(r.code, r.stderr + r.stdout).toBe(0);
      const res = JSON.parse(r.stdout);
      expect(res.ok).toBe(true);
      expect(res.steps.every((s: any) => s.status === 'done')).toBe(true);
      console.log(`apply: ${((Date.now() - started) / 1000).toFixed(1)} s;`, res.steps.map((s: any) => `${s.id} ${(s.ms / 1000).toFixed(1)}s`).join(', '));

      // The real v1.32.10 operator runs Calico 3.27.4 and says so itself; exactly the 3.27.4 CRDs (none merged with
      // 3.28's, none deleted), every population object unchanged, an Installation valid for 3.27 (no pool name,
      // strict validation passes), the lock given back; IPAM as before.
      await expectRealOperatorRuns(client, cluster, 'v1.32.10', 'v3.27.4', true);
      const after = await expectDowngradedTo327(client, population, before);
      const instCrd = fixtureObjects('3.27.4', 'tigera-operator.yaml').find((o) => o.metadata.name === 'installations.operator.tigera.io')!;
      const inst = await client.get(crdResourceType(instCrd), undefined, 'default');
      expect(inst.spec.calicoNetwork.ipPools[0]).toMatchObject({ cidr: '192.168.0.0/16', blockSize: 26, encapsulation: 'VXLANCrossSubnet' });
      expect(inst.spec.calicoNetwork.ipPools[0].name).toBeUndefined();
      await expectIpamAsBefore(client, ipamBefore, checkBefore, { withPods: true });
      await expectPodAddressesHeld(client, podCount);

      // The journal next to the bundle records each step's start and end.
      const j = Journal.read(journalPathFor(bundle, res.planId));
      expect(j.done).toBe(true);
      expect(j.remembered.operatorReplicas).toBe(1);
      uninterrupted = after;

      // Applying the same plan again is refused (already started); --resume of a finished plan does nothing.
      const again = await runCli(['apply', plan, '--yes']);
      expect(again.code).toBe(5);
      expect(again.stderr).toMatch(/already started/);
    },
    20 * 60_000,
  );

  it(
    'a stale lock is reported and broken; then SIGKILL after each step in turn and --resume: the end state equals the uninterrupted run',
    async () => {
      expect(uninterrupted, 'needs the uninterrupted run above').toBeDefined();
      // Back to 3.28.1 as its manifests have it; the real v1.34.3 operator takes over and reports.
      await installCalico328(client);
      await expectRealOperatorRuns(client, cluster, 'v1.34.3', 'v3.28.1', false);
      const { plan, bundle, out } = await exportAndPlan('killed');

      // A lock left by a process that is gone: reported as stale with holder and age, taken with --break-lock.
      const lease = await client.get(K.lease, LOCK_NAMESPACE, LOCK_NAME);
      const then = new Date(Date.now() - 5 * 60_000).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
      await client.replace(K.lease, {
        ...lease,
        spec: { holderIdentity: `${os.hostname()}/999999/plan-gone`, leaseDurationSeconds: 60, acquireTime: then, renewTime: then },
      });
      const refused = await runCli(['apply', plan, '--yes']);
      expect(refused.code).toBe(5);
      expect(refused.stderr).toMatch(/stale apply lock is held by .*\/999999\/plan-gone, held for 3\d\ds/);
      expect(refused.stderr).toMatch(/--break-lock/);

      const started = Date.now();
      await applyKilledAtEachStep(
        plan,
        bundle,
        out,
        async (k, st) => {
          if (k === 2) {
            // The operator is paused now; the replica count to go back to is in the journal, not in the Deployment.
            expect((await client.get(K.deployment, 'tigera-operator', 'tigera-operator')).spec.replicas).toBe(0);
            expect(st.remembered.operatorReplicas).toBe(1);
          }
        },
        ['--break-lock'],
      );
      console.log(`killed after each of ${out.steps.length - 1} steps and resumed: ${((Date.now() - started) / 1000).toFixed(1)} s`);
      await expectRealOperatorRuns(client, cluster, 'v1.32.10', 'v3.27.4', true);
      expect(snapshotDifferences(await calicoSnapshot(client), uninterrupted!).join('\n')).toBe('');
      await expectIpamAsBefore(client, ipamBefore, checkBefore, { withPods: true });
      await expectPodAddressesHeld(client, podCount);
    },
    30 * 60_000,
  );
});
