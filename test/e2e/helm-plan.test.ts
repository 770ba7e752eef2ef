/**
 * A Helm-installed Calico upgraded with plan + apply (issue 31, item 2, "Helm done right"): `cluster up --calico
 * 3.28.1 --install helm` (the real helm 4; the file runs again with helm 3, `--install helm3`; the chart packaged
 * from the release's source tree), one value of the user's own set with `helm upgrade --reuse-values`, a bundle, then
 * `plan --to 3.29.7` and `apply --yes`. Afterwards Helm must tell the truth: `helm history` has a new deployed
 * revision of the 3.29.7 chart and `helm get values` still has every value the user set; the real v1.36.16 operator
 * (from the Deployment Helm wrote) runs.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalCluster } from '../../src/dev/local-cluster/cluster.js';
import { helmEnv } from '../../src/dev/local-cluster/calico-helm.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import { buildHelm, helm, tigeraOperatorChart } from '../support/helm.js';
import { HELM_NS, HELM_RELEASE, cleanUpHelmCalico, clusterCli, helmHistory, helmOk, helmValues } from './helm-support.js';
import { explain, kubeconfig, runCli, testClient } from './helpers.js';

const NS = HELM_NS;
const RELEASE = HELM_RELEASE;

describe.each([4, 3] as const)('plan and apply on a Calico installed by the real helm %i', (major) => {
  const cluster = new LocalCluster({ name: process.env.CNI_REWIND_CLUSTER_NAME ?? 'e2e' });
  let client: KubeClient;
  let helmBin: string;
  let home: string;
  let dir: string;
  let chart329: string;
  /** The user's values as helm had them before the plan (the harness's values plus additionalLabels.team). */
  let valuesBefore: Record<string, unknown>;
  const h = (args: string[]) => helm(helmBin, kubeconfig(), home, args);
  /** cni-rewind's runs get helm's folders under `home` too: nothing of the developer's Helm setup takes part. */
  const cli = (args: string[], env: Record<string, string> = {}) =>
    runCli(args, { env: { ...(helmEnv(kubeconfig(), home) as Record<string, string>), ...env } });
  const history = () => helmHistory(h);
  const values = () => helmValues(h);

  const cleanUp = () => cleanUpHelmCalico(client, cluster, h, helmBin);
  beforeAll(async () => {
    client = await testClient();
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-helm-plan-'));
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-helm-plan-out-'));
    helmBin = await buildHelm(major);
    chart329 = await tigeraOperatorChart('v3.29.7');
    const chart328 = await tigeraOperatorChart('v3.28.1');
    await cleanUp();
    const up = await clusterCli(['up', '--calico', '3.28.1', '--install', major === 3 ? 'helm3' : 'helm']);
    expect(up.code, up.stderr.slice(-3000)).toBe(0);
    // A value of the user's own, as a second revision: it must survive the upgrade. Helm 4 applies server-side and
    // the operator owns the Installation's pools it filled in: a Helm 4 user forces the chart's (Helm 3 merges).
    const force = major === 4 ? ['--force-conflicts'] : [];
    helmOk(
      await h(['upgrade', RELEASE, chart328, '-n', NS, '--reuse-values', '--set', 'additionalLabels.team=platform', ...force]),
      'helm upgrade (user value)',
    );
    valuesBefore = await values();
    expect(valuesBefore).toMatchObject({ additionalLabels: { team: 'platform' }, installation: { enabled: true } });
  }, 1_800_000);
  afterAll(async () => {
    if (client) await cleanUp();
    client?.close();
    for (const d of [home, dir]) if (d) fs.rmSync(d, { recursive: true, force: true });
  }, 600_000);

  it('plan --to 3.29.7 and apply: helm history shows the 3.29.7 chart deployed, helm get values the user’s values', async () => {
    expect(await history()).toEqual([
      [1, 'superseded', 'tigera-operator-v3.28.1'],
      [2, 'deployed', 'tigera-operator-v3.28.1'],
    ]);
    const bundle = path.join(dir, 'bundle');
    const exp = await cli(['export', '--out', bundle]);
    expect(exp.code, explain(exp)).toBe(0);
    const planFile = path.join(dir, 'plan-up.yaml');
    const plan = await cli([
      'plan',
      '--to',
      '3.29.7',
      '--bundle',
      bundle,
      '--no-disk-snapshots',
      '--helm',
      helmBin,
      '--helm-chart',
      chart329,
      '--out',
      planFile,
      '-o',
      'json',
    ]);
    expect(plan.code, explain(plan)).toBe(0);
    const planned = JSON.parse(plan.stdout);
    expect(planned.helm).toMatchObject({ release: RELEASE, namespace: NS, storage: 'secret', currentRevision: 2, action: 'upgrade', chart: chart329 });
    expect(planned.steps.map((s: { id: string }) => s.id)).toEqual(['preflight', 'apply-crds', 'helm-upgrade', 'wait-rollout', 'verify-data']);

    // As people read it, and refused by name (exit 5) when there is no helm to carry it out.
    const human = await cli(['plan', '--to', '3.29.7', '--bundle', bundle, '--no-disk-snapshots', '--helm', helmBin, '--helm-chart', chart329]);
    expect(human.code, explain(human)).toBe(0);
    expect(human.stdout).toContain(`  Helm release ${NS}/${RELEASE} (revision 2, chart v3.28.1): helm upgrade with ${chart329} and the release's values\n`);
    const planNoHelm = await cli(['plan', '--to', '3.29.7', '--bundle', bundle, '--no-disk-snapshots', '--helm-chart', chart329], {
      PATH: path.dirname(process.execPath),
    });
    expect(planNoHelm.code, explain(planNoHelm)).toBe(5);
    expect(planNoHelm.stderr).toMatch(
      /^cni-rewind: helm not found on PATH \(a Helm install is changed with helm; install it or pass --helm PATH\); no plan was made$/m,
    );

    // The chart is code that runs in the cluster: apply takes it from its own command line, never from the plan file.
    const noChart = await cli(['apply', planFile, '--yes', '--helm', helmBin]);
    expect(noChart.code, explain(noChart)).toBe(5);
    expect(noChart.stderr).toContain(
      `the plan cannot be applied: it upgrades with chart ${chart329}, and this apply command line gives projectcalico/tigera-operator`,
    );
    // No helm program: refused by name before anything is written (no journal: a later apply is not a resume).
    const noHelm = await cli(['apply', planFile, '--yes', '--helm-chart', chart329], { PATH: path.dirname(process.execPath) });
    expect(noHelm.code, explain(noHelm)).toBe(5);
    expect(noHelm.stderr).toMatch(/helm not found on PATH \(a Helm install is changed with helm; install it or pass --helm PATH\); the plan was not applied/);
    expect(await history()).toHaveLength(2);

    const started = Date.now();
    const apply = await cli(['apply', planFile, '--yes', '--helm', helmBin, '--helm-chart', chart329]);
    console.log(`apply (helm upgrade 3.28.1 -> 3.29.7) took ${((Date.now() - started) / 1000).toFixed(1)} s`);
    expect(apply.code, explain(apply)).toBe(0);

    expect(await history()).toEqual([
      [1, 'superseded', 'tigera-operator-v3.28.1'],
      [2, 'superseded', 'tigera-operator-v3.28.1'],
      [3, 'deployed', 'tigera-operator-v3.29.7'],
    ]);
    expect(await values()).toEqual(valuesBefore);
    const deployment = await client.get(K.deployment, NS, 'tigera-operator');
    expect(deployment.metadata.labels).toMatchObject({ team: 'platform' });
    expect(deployment.spec.template.spec.containers[0].image).toBe('quay.io/tigera/operator:v1.36.16');
  }, 1_800_000);

  it('plan --to 3.28.1 (back) rolls back to revision 2, the newest of the 3.28.1 chart: its chart and values', async () => {
    const bundle = path.join(dir, 'bundle-back');
    const exp = await cli(['export', '--out', bundle]);
    expect(exp.code, explain(exp)).toBe(0);
    const planFile = path.join(dir, 'plan-back.yaml');
    const plan = await cli(['plan', '--to', '3.28.1', '--bundle', bundle, '--no-disk-snapshots', '--helm', helmBin, '--out', planFile, '-o', 'json']);
    expect(plan.code, explain(plan)).toBe(0);
    const planned = JSON.parse(plan.stdout);
    expect(planned.direction).toBe('downgrade');
    expect(planned.helm).toMatchObject({ release: RELEASE, namespace: NS, currentRevision: 3, action: 'rollback', rollbackRevision: 2 });
    expect(planned.steps.map((s: { id: string }) => s.id)).toEqual([
      'preflight',
      'helm-rollback',
      'apply-crds',
      'transform-installation',
      'wait-rollout',
      'verify-data',
    ]);

    const started = Date.now();
    const apply = await cli(['apply', planFile, '--yes', '--helm', helmBin]);
    console.log(`apply (helm rollback 3.29.7 -> 3.28.1) took ${((Date.now() - started) / 1000).toFixed(1)} s`);
    expect(apply.code, explain(apply)).toBe(0);
    expect(await history()).toEqual([
      [1, 'superseded', 'tigera-operator-v3.28.1'],
      [2, 'superseded', 'tigera-operator-v3.28.1'],
      [3, 'superseded', 'tigera-operator-v3.29.7'],
      [4, 'deployed', 'tigera-operator-v3.28.1'],
    ]);
    expect(await values()).toEqual(valuesBefore);
    const deployment = await client.get(K.deployment, NS, 'tigera-operator');
    expect(deployment.spec.template.spec.containers[0].image).toBe('quay.io/tigera/operator:v1.34.3');
  }, 1_800_000);
});
