import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { CalicoObjects } from '../calico/calico-objects.js';
import { isErrorKind } from '../core/errors.js';
import type { HelmStrategy, Plan } from '../plan/types.js';
import type { KubeClient } from '../kube/client.js';
import { helmUpgrade, prepareHelm } from './helm-steps.js';

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

/**
 * A stand-in helm (a shell script, named as a fake) with the release at revision 2 of the 3.27.4 chart: answers
 * show chart, get values (from values.json beside it), history, version, and on upgrade keeps a copy of the -f file
 * and its mode, and the next history has revision 3 of the 3.28.1 chart deployed.
 */
function fakeHelm(values: unknown): { bin: string; dir: string } {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-fake-helm-'));
  fs.writeFileSync(path.join(d, 'values.json'), JSON.stringify(values));
  const before = '[{"revision":2,"status":"deployed","chart":"tigera-operator-v3.27.4"}]';
  const after = '[{"revision":2,"status":"superseded","chart":"tigera-operator-v3.27.4"},{"revision":3,"status":"deployed","chart":"tigera-operator-v3.28.1"}]';
  const script = `#!/bin/sh
d="${d}"
case "$1" in
  version) echo v3.19.0 ;;
  show) printf 'name: tigera-operator\\nversion: v3.28.1\\n' ;;
  get) cat "$d/values.json" ;;
  history) if [ -f "$d/upgraded" ]; then echo '${after}'; else echo '${before}'; fi ;;
  upgrade) while [ $# -gt 0 ]; do if [ "$1" = -f ]; then cp "$2" "$d/seen"; stat -c %a "$2" > "$d/mode"; fi; shift; done; touch "$d/upgraded" ;;
  *) exit 3 ;;
esac
`;
  fs.writeFileSync(path.join(d, 'helm'), script, { mode: 0o755 });
  return { bin: path.join(d, 'helm'), dir: d };
}

describe('helm upgrade carries the plan’s pool edits in the values (calico#9100 on a Helm install)', () => {
  const live = { ...objects({ name: 'calico', namespace: 'tigera-operator' }) } as CalicoObjects;
  const entries = [{ cidr: '192.168.0.0/16', blockSize: 26, natOutgoing: 'Enabled', nodeSelector: 'all()' }];
  const installation = {
    apiVersion: 'operator.tigera.io/v1',
    kind: 'Installation',
    metadata: { name: 'default' },
    spec: { calicoNetwork: { ipPools: entries } },
  };
  const up: HelmStrategy = { ...strategy, chart: '/charts/tigera-operator-v3.28.1.tgz' };
  const stopPlan = {
    target: { version: 'v3.28.1' },
    helm: up,
    transforms: {
      installation: { removeFields: [], trimPoolsPerFamily: false, stopAllocations: { cidrs: ['192.168.0.0/16'], field: 'nodeSelector', value: '!all()' } },
    },
  } as unknown as Plan;
  const given = (bin: string) => ({ helm: bin, helmChart: up.chart });
  const client = { getOrUndefined: async () => installation, delete: async () => undefined } as unknown as KubeClient;

  it('refuses before the journal when the values turn the chart’s Installation off', async () => {
    const { bin } = fakeHelm({ installation: { enabled: false } });
    expect(await refusal(prepareHelm({ ...live, installation } as CalicoObjects, stopPlan, given(bin)))).toMatch(
      /^the release's values turn the chart's Installation off \(installation\.enabled: false\)/,
    );
  });

  it('values without ipPools: helm upgrade gets the Installation’s entries stopped, in a 0600 file, and the result names no value', async () => {
    const { bin, dir: d } = fakeHelm({ imagePullSecrets: { gcr: 'c2VjcmV0' } });
    const run = await prepareHelm({ ...live, installation } as CalicoObjects, stopPlan, given(bin));
    const result = await helmUpgrade(client, run, stopPlan);
    expect(JSON.parse(fs.readFileSync(path.join(d, 'seen'), 'utf8'))).toEqual({
      imagePullSecrets: { gcr: 'c2VjcmV0' },
      installation: { calicoNetwork: { ipPools: [{ ...entries[0], nodeSelector: '!all()' }] } },
    });
    expect(fs.readFileSync(path.join(d, 'mode'), 'utf8').trim()).toBe('600');
    expect(result).toBe(
      'Helm release tigera-operator/calico at revision 3 (tigera-operator-v3.28.1, deployed), the values of revision 2 carried with installation.calicoNetwork.ipPools edited ' +
        '(installation.calicoNetwork.ipPools written from Installation default\'s 1 entries (the values had none); 192.168.0.0/16: nodeSelector "!all()")',
    );
    expect(result).not.toContain('c2VjcmV0');
    // Resumed after helm upgrade: the step finds its work done.
    expect(await helmUpgrade(client, run, stopPlan)).toBe('already done: revision 3 (tigera-operator-v3.28.1)');
  });
});
