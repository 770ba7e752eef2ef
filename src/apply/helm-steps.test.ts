import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { CalicoObjects } from '../calico/calico-objects.js';
import { isErrorKind } from '../core/errors.js';
import type { HelmStrategy, Plan } from '../plan/types.js';
import { prepareHelm } from './helm-steps.js';

/** What apply read at its start: the operator Deployment, with Helm's annotations when `release` is given. */
const objects = (release?: { name: string; namespace: string }): CalicoObjects =>
  ({
    crdNames: [],
    operator: {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: {
        name: 'tigera-operator',
        namespace: 'tigera-operator',
        ...(release ? { annotations: { 'meta.helm.sh/release-name': release.name, 'meta.helm.sh/release-namespace': release.namespace } } : {}),
      },
      spec: { template: { spec: { containers: [{ name: 'tigera-operator', image: 'quay.io/tigera/operator:v1.34.3' }] } } },
    },
  }) as unknown as CalicoObjects;

const strategy: HelmStrategy = {
  release: 'calico',
  namespace: 'tigera-operator',
  storage: 'secret',
  currentRevision: 2,
  action: 'upgrade',
  chart: '/charts/tigera-operator-v3.29.7.tgz',
};
const plan = (helm?: HelmStrategy) => ({ target: { version: 'v3.29.7' }, ...(helm ? { helm } : {}) }) as unknown as Plan;

/** An executable named helm that is never run: the checks below refuse before any helm command. */
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-helm-steps-'));
const helmBin = path.join(dir, 'helm');
fs.writeFileSync(helmBin, '#!/bin/sh\nexit 99\n', { mode: 0o755 });

async function refusal(p: Promise<unknown>): Promise<string> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isErrorKind(err, 'refused'), String(err)).toBe(true);
  return (err as Error).message;
}

describe('prepareHelm (before the journal, from what apply read and its own command line)', () => {
  it('an operator install not by Helm with a plan without the strategy: nothing to prepare', async () => {
    expect(await prepareHelm(objects(), plan(), {})).toBeUndefined();
  });

  it('refuses a plan without the Helm strategy on a Helm install', async () => {
    expect(await refusal(prepareHelm(objects({ name: 'calico', namespace: 'tigera-operator' }), plan(), {}))).toBe(
      'the plan cannot be applied: the tigera-operator is Helm release tigera-operator/calico, and this plan does not change it with helm',
    );
  });

  it('refuses a plan for another release than the cluster’s, or for a cluster whose operator Helm does not manage', async () => {
    expect(await refusal(prepareHelm(objects({ name: 'other', namespace: 'tigera-operator' }), plan(strategy), { helm: helmBin }))).toBe(
      "the plan cannot be applied: the plan changes Helm release tigera-operator/calico, but the cluster's tigera-operator is release tigera-operator/other",
    );
    expect(await refusal(prepareHelm(objects(), plan(strategy), { helm: helmBin }))).toMatch(/is not installed by Helm$/);
  });

  it('refuses without a helm program, naming it, and a chart other than the plan’s, before helm runs', async () => {
    const live = objects({ name: 'calico', namespace: 'tigera-operator' });
    expect(await refusal(prepareHelm(live, plan(strategy), { helm: path.join(dir, 'missing') }))).toBe(
      `helm not found: --helm ${path.join(dir, 'missing')} is not an executable file; the plan was not applied`,
    );
    expect(await refusal(prepareHelm(live, plan(strategy), { helm: helmBin }))).toBe(
      'the plan cannot be applied: it upgrades with chart /charts/tigera-operator-v3.29.7.tgz, and this apply command line gives projectcalico/tigera-operator',
    );
    // A chart file that is not the one the plan recorded (its sha256) is refused as well.
    const chart = path.join(dir, 'tigera-operator-v3.29.7.tgz');
    fs.writeFileSync(chart, 'not the planned chart');
    const recorded = { ...strategy, chart, chartSha256: '0'.repeat(64) };
    expect(await refusal(prepareHelm(live, plan(recorded), { helm: helmBin, helmChart: chart }))).toBe(
      `the plan cannot be applied: the chart ${chart} changed since the plan was made`,
    );
  });
});
