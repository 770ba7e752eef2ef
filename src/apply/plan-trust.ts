/**
 * A plan file is input: anyone who can write it could edit it. `apply` therefore takes from it only what it
 * cannot recompute (the target version, the strategy, the transforms the user reviewed) and re-derives or
 * re-checks the rest: the steps come from the strategy (the step catalogue of plan.ts), every release file the
 * steps use must have the checksum the plan recorded, and anything that would load code or read files outside the
 * bundle and the release (rolling.providerModules, rolling.config, rolling.mapping) must be given again on the
 * `apply` command line, as must a Helm plan's chart (helm-steps.ts prepareHelm; the helm program is never the plan's).
 * The safety facts (cluster identity, bundle checksums and age, preflight) are recomputed
 * by preflightChecks in plan-steps.ts.
 */
import path from 'node:path';
import { leavesPolicyNaming } from '../calico/policy-names.js';
import type { Release } from '../calico/release.js';
import { RefusedError } from '../core/errors.js';
import { etcdSteps } from '../plan/etcd-plan.js';
import { installationCleanup, stepsFor } from '../plan/plan.js';
import { PLAN_FLAGS } from '../plan/rules.js';
import { MIGRATE_STEP_IDS, MIGRATE_STEP_TEXT, STEP_TEXT } from '../plan/steps.js';
import { hasOperatorLeftovers, type Plan } from '../plan/types.js';
import type { HelmGiven } from './helm-steps.js';
import type { CalicoctlGiven } from './migrate-steps.js';

/** What the `apply` command line says about code and files outside the bundle and the release. */
export interface ApplyGiven {
  providerModules?: string[];
  config?: string;
  mapping?: string;
  /** `--helm`, `--helm-chart` and how helm reaches the cluster (helm-steps.ts). */
  helm?: HelmGiven;
  /** `--calicoctl` and how calicoctl reaches the cluster (migrate-steps.ts). */
  calicoctl?: CalicoctlGiven;
}

const refuse = (what: string, hint = 'make a new plan with `cni-rewind plan`') => new RefusedError(`the plan cannot be applied: ${what}`, { hint });

/** The plan's shape, as far as apply relies on it (readPlan checked only that the top-level fields exist). */
function checkShape(plan: Plan): void {
  const str = (v: unknown) => typeof v === 'string' && v.length > 0;
  if (!str(plan.target?.version) || !str(plan.target?.manifests) || !plan.target.files || typeof plan.target.files !== 'object')
    throw refuse('its target is incomplete');
  if (!['operator', 'manifest'].includes(plan.current?.installType as string))
    throw refuse(`its install type ${JSON.stringify(plan.current?.installType)} is not operator or manifest`);
  if (!['in-place', 'reinstall', 'migrate-datastore'].includes(plan.strategy))
    throw refuse(`its strategy ${JSON.stringify(plan.strategy)} is not in-place, reinstall or migrate-datastore`);
  if (plan.datastore !== undefined && (plan.datastore !== 'etcd' || plan.strategy !== 'in-place' || plan.current.installType !== 'manifest'))
    throw refuse(`its datastore ${JSON.stringify(plan.datastore)} is not etcd for an in-place plan of a manifest install`);
  if (plan.strategy === 'migrate-datastore' && (plan.migrate?.from !== 'etcd' || plan.migrate.to !== 'kubernetes' || !plan.migrate.rollback))
    throw refuse('it migrates the datastore but does not say how (migrate)');
  if (!str(plan.bundle?.path) || !str(plan.bundle?.manifestSha256) || !str(plan.cluster?.uid)) throw refuse('its bundle or cluster record is incomplete');
  const o = plan.options;
  if (typeof o?.rebootNodes !== 'boolean' || typeof o.diskSnapshots !== 'boolean' || !str(o.maxBackupAge) || !Array.isArray(o.flags))
    throw refuse('its options are incomplete');
  if (!Array.isArray(plan.steps) || !Array.isArray(plan.preflight ?? []) || !Array.isArray(plan.findings ?? []))
    throw refuse('its steps, preflight or findings are not lists');
}

/** The steps the plan's install type and strategy give; the plan's own list must be exactly these. */
export function derivedSteps(plan: Plan, target: Release): Plan['steps'] {
  if (plan.datastore === 'etcd') return etcdSteps();
  if (plan.strategy === 'migrate-datastore') return MIGRATE_STEP_IDS.map((id) => ({ id, ...STEP_TEXT[id], ...MIGRATE_STEP_TEXT[id] }));
  const restoreDrift = plan.options.flags.includes(PLAN_FLAGS.restoreDrift) && (plan.drift?.length ?? 0) > 0;
  const install = plan.current.installType === 'operator' ? 'operator' : 'manifest';
  const helm = plan.helm && { action: plan.helm.action, cleanup: installationCleanup(plan.transforms.installation) };
  const removeLeftovers = !!plan.transforms?.installation && hasOperatorLeftovers(plan.transforms.installation);
  const renamePolicies = leavesPolicyNaming(plan.current.version, target.version);
  return stepsFor(install, plan.strategy, target, { restoreDrift, rebootNodes: plan.options.rebootNodes, removeLeftovers, renamePolicies, helm });
}

const sameFile = (a: string, b: string | undefined) => b !== undefined && path.resolve(a) === path.resolve(b);

/** Refuse (exit 5) a plan whose steps, release files or outside sources do not hold up. Returns the steps to run. */
export function checkPlanIntegrity(plan: Plan, target: Release, given: ApplyGiven): Plan['steps'] {
  checkShape(plan);
  const steps = derivedSteps(plan, target);
  const want = steps.map((s) => s.id).join(', ');
  const have = plan.steps.map((s) => (typeof s?.id === 'string' ? s.id : '?')).join(', ');
  if (want !== have) throw refuse(`its steps (${have}) are not the ones its strategy ${plan.strategy} gives (${want})`);
  if (plan.options.rebootNodes && !plan.rolling?.nodes) throw refuse('it reboots nodes but has no node list (rolling)');

  // Every release file the steps use, not only those the plan lists: an edited `files: {}` skips nothing.
  for (const [name, f] of Object.entries(target.files)) {
    const recorded = Object.hasOwn(plan.target.files, name) ? plan.target.files[name]?.sha256 : undefined;
    if (recorded !== f.sha256)
      throw refuse(`the target manifest ${name} in ${plan.target.manifests} ${recorded ? 'changed since the plan was made' : 'has no checksum in the plan'}`);
  }
  for (const name of Object.keys(plan.target.files))
    if (!Object.hasOwn(target.files, name)) throw refuse(`the plan lists a release file ${name} that ${plan.target.manifests} does not have`);

  // Code and files outside the bundle and the release: only when the apply command line names them too.
  const r = plan.rolling;
  if (r) {
    const givenModules = given.providerModules ?? [];
    for (const m of r.providerModules ?? []) {
      if (!givenModules.some((g) => g === m || sameFile(g, m))) {
        throw refuse(
          `it would load the provider module ${m}, which this apply command line does not give`,
          `if you trust it, rerun with --provider-module ${m}`,
        );
      }
    }
    if (r.config && !sameFile(r.config, given.config))
      throw refuse(
        `it would read the config file ${r.config}, which this apply command line does not give`,
        `if you trust it, rerun with --config ${r.config}`,
      );
    if (r.mapping && !sameFile(r.mapping, given.mapping))
      throw refuse(
        `it would read the node mapping ${r.mapping}, which this apply command line does not give`,
        `if you trust it, rerun with --mapping ${r.mapping}`,
      );
  }
  return steps;
}
