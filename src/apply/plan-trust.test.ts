import { describe, expect, it } from 'vitest';
import type { Release } from '../calico/release.js';
import type { InstallationTransform, Plan } from '../plan/types.js';
import { derivedSteps } from './plan-trust.js';

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
