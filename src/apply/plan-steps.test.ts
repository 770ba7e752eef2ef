import { describe, expect, it } from 'vitest';
import type { Release } from '../calico/release.js';
import { RefusedError } from '../core/errors.js';
import { stepsFor } from '../plan/plan.js';
import { MIGRATE_STEP_IDS, STEP_KINDS, STEP_TEXT } from '../plan/steps.js';
import type { PlanStep } from '../plan/types.js';
import { STEP_IMPLEMENTATIONS, buildSteps, type StepDeps } from './plan-steps.js';

const depsWith = (steps: unknown[]) => ({ plan: { steps: steps as PlanStep[] } }) as StepDeps;

describe('the step catalogue', () => {
  it('has a text and an implementation for every kind, and nothing else', () => {
    expect(Object.keys(STEP_IMPLEMENTATIONS).sort()).toEqual([...STEP_KINDS].sort());
    expect(Object.keys(STEP_TEXT).sort()).toEqual([...STEP_KINDS].sort());
  });

  it('lays out only kinds that have an implementation, for every install type, strategy and option', () => {
    const target = { version: 'v3.27.4', calicoManifest: [] } as unknown as Release;
    const used = new Set<string>();
    for (const [install, strategy] of [
      ['operator', 'in-place'],
      ['operator', 'reinstall'],
      ['manifest', 'in-place'],
    ] as const) {
      const helm =
        strategy === 'in-place' && install === 'operator' ? (['upgrade', 'rollback'] as const).map((action) => ({ helm: { action, cleanup: true } })) : [];
      for (const opts of [
        {},
        { restoreDrift: true },
        { rebootNodes: true },
        { restoreDrift: true, rebootNodes: true },
        { removeLeftovers: true },
        { renamePolicies: true, rebootNodes: true },
        ...helm.map((h) => ({ ...h, renamePolicies: true })),
      ]) {
        const steps = stepsFor(install, strategy, target, opts);
        const built = buildSteps(depsWith(steps));
        expect(built.map((s) => [s.id, s.title])).toEqual(steps.map((s) => [s.id, STEP_TEXT[s.id].title]));
        for (const s of steps) used.add(s.id);
        // Renamed only once the target's kube-controllers runs (after the rollout), and before the data is verified.
        const ids = steps.map((s) => s.id);
        if ('renamePolicies' in opts)
          expect(ids.slice(ids.indexOf('wait-rollout'), ids.indexOf('verify-data'))).toEqual(['wait-rollout', 'rename-policies-back']);
        else expect(ids).not.toContain('rename-policies-back');
      }
    }
    // A datastore migration's steps (plan --migrate-datastore: migrate-plan.ts).
    const migration = MIGRATE_STEP_IDS.map((id) => ({ id, ...STEP_TEXT[id] }));
    expect(buildSteps(depsWith(migration)).map((s) => s.id)).toEqual(MIGRATE_STEP_IDS);
    for (const id of MIGRATE_STEP_IDS) used.add(id);
    // Every kind is reachable from some plan: a kind nobody lays out would be dead code.
    expect([...used].sort()).toEqual([...STEP_KINDS].sort());
  });

  it('refuses a plan file whose step is not in the catalogue, whatever the name', () => {
    for (const id of ['drop-everything', 'toString', '__proto__', 'constructor', 42]) {
      expect(() => buildSteps(depsWith([{ id, title: 'x', description: 'x' }])), String(id)).toThrow(RefusedError);
    }
  });

  it('is checked by the compiler (tsc in npm run build)', () => {
    const { 'reboot-nodes': _dropped, ...rest } = STEP_IMPLEMENTATIONS;
    // @ts-expect-error: a table without an implementation of reboot-nodes
    const incomplete: typeof STEP_IMPLEMENTATIONS = rest;
    // @ts-expect-error: not a step kind
    const unknown: PlanStep = { id: 'drop-everything', title: 'x', description: 'x' };
    expect(Object.keys(incomplete)).not.toContain('reboot-nodes');
    expect(unknown.id).toBe('drop-everything');
  });
});
