import { describe, expect, it } from 'vitest';
import type { Release } from '../calico/release.js';
import type { InstallationTransform, Plan } from '../plan/types.js';
import { checkPlanIntegrity, derivedSteps } from './plan-trust.js';

const target = { version: 'v3.29.7' } as unknown as Release;
const planWith = (installation: InstallationTransform, strategy: Plan['strategy'] = 'in-place') =>
  ({ current: { installType: 'operator' }, strategy, options: { flags: [], rebootNodes: false }, transforms: { installation } }) as unknown as Plan;
const ids = (p: Plan) => derivedSteps(p, target).map((s) => s.id);

describe('apply derives remove-operator-leftovers from the plan it was shown (issue 30)', () => {
  it("right before transform-installation when the plan found a newer operator's finalizers, reports or custom-resource finalizers", () => {
    const found: InstallationTransform[] = [
      { removeFields: [], trimPoolsPerFamily: false, removeFinalizers: ['operator.tigera.io/whisker-controller'] },
      { removeFields: [], trimPoolsPerFamily: false, deleteTigeraStatuses: ['whisker'] },
      { removeFields: [], trimPoolsPerFamily: false, removeCustomResourceFinalizers: [{ crd: 'istios.operator.tigera.io', name: 'default', finalizer: 'x' }] },
    ];
    for (const t of found) {
      for (const strategy of ['in-place', 'reinstall'] as const) {
        const steps = ids(planWith(t, strategy));
        expect(steps.indexOf('remove-operator-leftovers'), JSON.stringify(t)).toBe(steps.indexOf('transform-installation') - 1);
      }
    }
  });

  it('not otherwise, so a plan that lists the step without such a finding is refused as edited (steps must match)', () => {
    expect(ids(planWith({ removeFields: [], trimPoolsPerFamily: false, removeFinalizers: [] }))).not.toContain('remove-operator-leftovers');
  });
});

describe('apply derives rename-policies-back from the versions of the plan (a downgrade from 3.32)', () => {
  const plan = (version: string) =>
    ({
      current: { installType: 'operator', version },
      strategy: 'in-place',
      options: { flags: [], rebootNodes: false },
      transforms: { installation: { removeFields: [], trimPoolsPerFamily: false } },
    }) as unknown as Plan;
  it('right after wait-rollout from 3.32.1 to 3.29.7; not from 3.30.7', () => {
    const from332 = derivedSteps(plan('v3.32.1'), target).map((s) => s.id);
    expect(from332[from332.indexOf('wait-rollout') + 1]).toBe('rename-policies-back');
    expect(derivedSteps(plan('v3.30.7'), target).map((s) => s.id)).not.toContain('rename-policies-back');
  });
});

describe('a datastore migration plan (plan --migrate-datastore)', () => {
  const migration = {
    current: { installType: 'manifest', version: 'v3.28.1' },
    strategy: 'migrate-datastore',
    options: { flags: [], rebootNodes: false },
    transforms: { installation: { removeFields: [], trimPoolsPerFamily: false } },
  } as unknown as Plan;
  it('has the migration steps whatever else the plan says: lock, copy, calico.yaml, rollout, verify, then unlock', () => {
    expect(ids(migration)).toEqual([
      'preflight',
      'migrate-lock-etcd',
      'migrate-copy',
      'apply-calico-manifest',
      'wait-rollout',
      'verify-migrated',
      'migrate-unlock',
    ]);
    expect(ids({ ...migration, options: { flags: [], rebootNodes: true } } as unknown as Plan)).not.toContain('reboot-nodes');
  });
});

describe('a plan for a calico-etcd.yaml install (datastore etcd)', () => {
  const etcdPlan = {
    current: { installType: 'manifest', version: 'v3.28.1' },
    strategy: 'in-place',
    datastore: 'etcd',
    options: { flags: [], rebootNodes: false },
    transforms: { installation: { removeFields: [], trimPoolsPerFamily: false } },
  } as unknown as Plan;
  it("has calico-etcd.yaml's steps: no CRDs to apply, the data verified in etcd", () => {
    expect(ids(etcdPlan)).toEqual(['preflight', 'apply-calico-manifest', 'wait-rollout', 'verify-data']);
    expect(derivedSteps(etcdPlan, target).find((s) => s.id === 'apply-calico-manifest')?.description).toContain('calico-etcd-secrets is never written');
  });
  it('a plan of the Kubernetes datastore keeps its own steps (apply-crds first)', () => {
    const { datastore: _d, ...kdd } = etcdPlan;
    const withCalicoYaml = { version: 'v3.29.7', calicoManifest: [] } as unknown as Release;
    expect(derivedSteps(kdd as Plan, withCalicoYaml).map((s) => s.id)).toEqual([
      'preflight',
      'apply-crds',
      'apply-calico-manifest',
      'wait-rollout',
      'verify-data',
    ]);
  });
  it('an etcd plan said to be of an operator install, or of another strategy, is refused as edited', () => {
    const release = { version: 'v3.29.7', files: {} } as unknown as Release;
    const whole = {
      ...etcdPlan,
      target: { version: 'v3.29.7', manifests: '/m', files: {} },
      bundle: { path: '/b', manifestSha256: 'x', id: 'b' },
      cluster: { uid: 'u' },
      options: { flags: [], rebootNodes: false, diskSnapshots: false, maxBackupAge: '24h' },
      steps: [],
    } as unknown as Plan;
    expect(() => checkPlanIntegrity({ ...whole, current: { installType: 'operator' } }, release, {})).toThrow(
      /datastore "etcd" is not etcd for an in-place plan/,
    );
    expect(() => checkPlanIntegrity({ ...whole, datastore: 'zookeeper' } as unknown as Plan, release, {})).toThrow(/datastore "zookeeper"/);
  });
});
