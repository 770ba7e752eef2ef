/**
 * `apply PLAN`: check the plan still holds (its bundle verifies and is the one it was made with, the target
 * manifests are the same files, nothing refuses), take the cluster lock, then run the steps with the journal.
 * On a failed step: stop, report the state and the exact restore commands, or restore resources with autoRollback.
 */
import { datastoreOfObjects, readCalicoObjects } from '../calico/calico-objects.js';
import type { EtcdAccessFlags } from '../calico/etcd-connection.js';
import { refuseUnsupportedObjects } from '../calico/supported.js';
import { refuseEnterprise, variantOf } from '../calico/enterprise.js';
import { describeReconciler, judgeReconcilers, markedObjects, refuseReconcilers } from '../calico/gitops.js';
import { openBundle, type Bundle } from '../bundle/reader.js';
import { verifyBundle } from '../bundle/verify.js';
import { loadRelease, type Release } from '../calico/release.js';
import { BadInputError, errorMessage, isErrorKind, RefusedError } from '../core/errors.js';
import type { Reporter } from '../io/host.js';
import type { KubeClient } from '../kube/client.js';
import { planBlockers } from '../plan/plan.js';
import { manifestSha256 } from '../plan/preflight.js';
import type { Plan } from '../plan/types.js';
import { runSteps, type StepOutcome } from './executor.js';
import { Journal, journalPathFor } from './journal.js';
import { ApplyLock, LockLostError, type LockHolder } from './lock.js';
import { prepareHelm } from './helm-steps.js';
import { prepareCalicoctl, refuseFinishedMigration, rollbackMigration, type CalicoctlRun, type RollbackDeps } from './migrate-steps.js';
import { buildSteps, preflightChecks, putObjects } from './plan-steps.js';
import { checkPlanIntegrity, type ApplyGiven } from './plan-trust.js';
import { restoreResources } from '../restore/restore.js';

export interface ApplyOptions {
  resume?: boolean;
  breakLock?: boolean;
  autoRollback?: boolean;
  /** Asked once the plan is checked and before the lock is taken; false stops without changes. */
  confirm?: (plan: Plan) => Promise<boolean>;
  /** Provider modules, config and mapping named on the command line (a plan's own are used only when given here too). */
  given?: ApplyGiven;
  /** Called once the journal is open, so the CLI can record an interruption (Ctrl-C) in it. */
  onStarted?: (journal: Journal, lock: ApplyLock) => void;
  rolloutTimeoutMs?: number;
  /** `--owner-suspended`: the user says the Argo CD / Flux owners apply would refuse for no longer revert changes. */
  ownerSuspended?: boolean;
  /** The plan file's path as the user gave it, for the commands printed on failure. */
  planPath?: string;
  /** `--rollback`: undo a datastore migration this plan started (migrate-steps.ts rollbackMigration) instead of running it. */
  rollback?: boolean;
  /** `--etcd-*`: Calico's etcd when calico-config and Secret calico-etcd-secrets do not name it all (etcd plans, migrations). */
  etcd?: EtcdAccessFlags;
}

export interface ApplyResult {
  planId: string;
  ok: boolean;
  /** Steps were already recorded before this run (a resume). */
  resumed: boolean;
  cancelled?: boolean;
  journal: string;
  steps: StepOutcome[];
  /** `refused`: the step stopped on a safety check (exit 5), not on a failure (exit 3). */
  failed?: { step: string; error: string; refused?: boolean; lockLost?: boolean; notStarted?: boolean };
  /** The lock holder this run took over (stale or broken). */
  tookOverLock?: LockHolder;
  /** With `--reboot-nodes`: where each node stands (from the journal), in the order they are rebooted. */
  nodes?: { node: string; provider: string; machine: string; phase: 'pending' | 'draining' | 'rebooting' | 'rebooted' | 'done' }[];
  /** Exact commands to get back to the bundle's state. */
  restoreCommands: string[];
  rollback?: { ran: boolean; ok: boolean; error?: string; summary?: string };
}

/** Everything `apply` checks before it may touch the cluster. Refusals exit 5. */
export async function checkPlanForApply(plan: Plan, given: ApplyGiven = {}): Promise<{ bundle: Bundle; target: Release; steps: Plan['steps'] }> {
  const blockers = planBlockers(plan);
  if (blockers.length) throw new RefusedError(`the plan cannot be applied: ${blockers.join('; ')}`, { hint: 'fix what it says and make a new plan' });
  let bundle: Bundle;
  try {
    bundle = await openBundle(plan.bundle.path);
  } catch (err) {
    throw new RefusedError(`the plan's bundle ${plan.bundle.path} cannot be read: ${errorMessage(err)}`);
  }
  try {
    const v = await verifyBundle(bundle);
    if (!v.ok)
      throw new RefusedError(
        `the plan's bundle ${plan.bundle.path} fails verify: ${v.problems
          .slice(0, 3)
          .map((p) => `${p.file}: ${p.problem}`)
          .join('; ')}`,
        { hint: 'nothing was changed; take a new backup and make a new plan' },
      );
    if (bundle.manifest.id !== plan.bundle.id || manifestSha256(bundle) !== plan.bundle.manifestSha256) {
      throw new RefusedError(`${plan.bundle.path} is not the bundle the plan was made with (id or manifest checksum differs)`);
    }
    // The same view of the release as the plan had: a manifest install's CRDs are calico.yaml's.
    const target = await loadRelease(plan.target.version, {
      manifests: plan.target.manifests,
      // A datastore migration's rollback puts calico-etcd.yaml back: its checksum is the plan's too.
      need: plan.strategy === 'migrate-datastore' || plan.datastore === 'etcd' ? 'etcd' : plan.current.installType === 'manifest' ? 'manifest' : 'operator',
    });
    const steps = checkPlanIntegrity(plan, target, given);
    return { bundle, target, steps };
  } catch (err) {
    await bundle.close();
    throw err;
  }
}

export function restoreCommands(plan: Plan, hasSnapshots: boolean, planPath = 'PLAN'): string[] {
  const b = JSON.stringify(plan.bundle.path).replace(/^"|"$/g, '');
  // A migration goes back by putting calico-etcd.yaml back and unlocking etcd, whose data it never changed.
  if (plan.strategy === 'migrate-datastore')
    return [`cni-rewind apply ${planPath} --rollback`, `# if etcd's data itself was lost: cni-rewind restore ${b} --resources`];
  const cmds = [`cni-rewind restore ${b} --resources`];
  if (hasSnapshots) cmds.push(`cni-rewind restore ${b} --disks`);
  if (plan.current.version) cmds.push(`# then, to put the previous Calico back in place: cni-rewind plan --to ${plan.current.version.slice(1)} --bundle ${b}`);
  return cmds;
}

export async function applyPlan(client: KubeClient, plan: Plan, opts: ApplyOptions, reporter: Reporter): Promise<ApplyResult> {
  // The checks below judge one read of the objects they look at, made now (not taken from the plan: it may have been
  // made elsewhere, and things change between plan and apply or between runs).
  const calico = await readCalicoObjects(client);
  // A plan made elsewhere rolls out Kubernetes-datastore manifests, and its steps write the v1 CRDs: refused on an etcd
  // cluster or one migrated to v3-CRD mode since the plan was made (or between runs), before the journal exists.
  refuseUnsupportedObjects(calico, 'apply', 'the plan was not applied', { etcdHandled: plan.strategy === 'migrate-datastore' || plan.datastore === 'etcd' });
  // A plan for an etcd install rolls out calico-etcd.yaml and checks etcd: on a cluster whose datastore is not etcd
  // (any more) it is refused, as the plan for the Kubernetes datastore is on etcd (above).
  if (plan.datastore === 'etcd' && datastoreOfObjects(calico).type !== 'etcd')
    throw new RefusedError(
      'the plan is for a Calico on the etcd datastore, and Calico here keeps its data in the Kubernetes datastore: the plan was not applied',
      {
        hint: 'make a new plan with `cni-rewind plan`',
      },
    );
  // Calico Enterprise since the plan was made (or a plan made on another cluster): its operator is not ours to replace.
  refuseEnterprise(variantOf(calico.installation), 'the plan was not applied');
  // A self-healing Argo CD application or an unsuspended Flux object puts its manifests back mid-plan: refused before
  // the journal exists (owners are suspended or resumed between plan and apply).
  for (const r of refuseReconcilers(await judgeReconcilers(client, markedObjects(calico)), !!opts.ownerSuspended))
    reporter.warn('CNR_APPLY_OWNER_SUSPENDED', `going ahead with --owner-suspended: ${describeReconciler(r)}`);
  const journalPath = journalPathFor(plan.bundle.path, plan.id);
  const journal = Journal.open(journalPath);
  if (journal.started && !opts.resume && !opts.rollback) {
    throw new RefusedError(`this plan was already started (journal ${journalPath})`, { hint: 'continue it with --resume' });
  }
  if (opts.resume && !journal.started) throw new BadInputError(`nothing to resume: no journal for plan ${plan.id} at ${journalPath}`);
  const checked = await checkPlanForApply(plan, opts.given);
  const { bundle, target } = checked;
  // A Helm install: helm from this command line or PATH, the release checked against the cluster's Helm record.
  const prepared = await Promise.all([prepareHelm(calico, plan, opts.given?.helm ?? {}), prepareCalicoctl(plan, opts.given?.calicoctl ?? {})]).catch(
    async (err) => {
      await bundle.close();
      throw err;
    },
  );
  const [helm, calicoctl] = prepared;
  // From here on the steps are the ones the strategy gives (checkPlanIntegrity proved the plan lists exactly these).
  plan = { ...plan, steps: checked.steps };
  const hasSnapshots = bundle.manifest.snapshots.length > 0;
  const base = { planId: plan.id, journal: journalPath, restoreCommands: restoreCommands(plan, hasSnapshots, opts.planPath), resumed: journal.started };
  try {
    if (opts.rollback) return await rollbackRun({ client, plan, target, reporter, calicoctl, journal, opts, base });
    if (journal.current.done) {
      reporter.info('CNR_APPLY_ALREADY_DONE', `plan ${plan.id} was already applied completely (journal ${journalPath})`);
      return { ...base, ok: true, steps: plan.steps.map((s) => ({ id: s.id, title: s.title, status: 'skipped' })) };
    }
    // The safety facts, recomputed from the cluster and the bundle before anything changes (also when the plan
    // file's preflight step or results were edited). A resume checks identity and bundle only.
    await preflightChecks({ client, plan, bundle, target }, 'apply', !!opts.resume && journal.started);
    if (opts.confirm && !(await opts.confirm(plan))) {
      return { ...base, ok: false, cancelled: true, steps: plan.steps.map((s) => ({ id: s.id, title: s.title, status: 'not-run' })) };
    }
    const lock = await ApplyLock.acquire(client, { planId: plan.id, resume: opts.resume, breakLock: opts.breakLock });
    if (lock.tookOver)
      reporter.warn('CNR_APPLY_LOCK_TAKEN', `took over the apply lock from ${lock.tookOver.identity}${lock.tookOver.stale ? ' (stale)' : ' (--break-lock)'}`);
    try {
      journal.begin(plan.id, !!opts.resume);
      opts.onStarted?.(journal, lock);
      const steps = buildSteps({ client, plan, target, bundle, reporter, helm, calicoctl, rolloutTimeoutMs: opts.rolloutTimeoutMs, etcd: opts.etcd });
      const r = await runSteps(steps, journal, { reporter, beforeStep: () => lock.check() });
      const result: ApplyResult = { ...base, ok: r.ok, steps: r.steps, tookOverLock: lock.tookOver };
      if (plan.rolling) {
        result.nodes = plan.rolling.nodes.map((n) => ({
          ...n,
          phase: (journal.current.remembered[`reboot-nodes/${n.node}`] as { phase?: 'done' } | undefined)?.phase ?? 'pending',
        }));
      }
      if (!r.ok && r.failed) {
        const lockLost = r.failed.cause instanceof LockLostError;
        result.failed = {
          step: r.failed.step,
          error: r.failed.error,
          ...(isErrorKind(r.failed.cause, 'refused') ? { refused: true } : {}),
          ...(lockLost ? { lockLost: true, notStarted: true } : {}),
        };
        // Without the lock another run may be changing the cluster now: a rollback would race it.
        if (opts.autoRollback && !lockLost) {
          reporter.warn(
            'CNR_APPLY_ROLLBACK',
            calicoctl
              ? `step ${r.failed.step} failed; putting calico-etcd.yaml back and unlocking etcd (--auto-rollback)`
              : `step ${r.failed.step} failed; restoring Calico resources from bundle ${plan.bundle.id} (--auto-rollback)`,
          );
          try {
            if (calicoctl) {
              const summary = await rollbackMigration(migrationRollbackDeps(client, plan, target, calicoctl, opts));
              journal.append({ event: 'remember', key: 'rolled-back', value: new Date().toISOString() });
              result.rollback = { ran: true, ok: true, summary };
            } else {
              await restoreResources(client, bundle, { existing: 'update', dropUnknownFields: true, ...(opts.etcd ? { etcd: opts.etcd } : {}) }, reporter);
              result.rollback = { ran: true, ok: true };
            }
          } catch (err) {
            result.rollback = { ran: true, ok: false, error: errorMessage(err) };
          }
        }
      }
      return result;
    } finally {
      await lock.release().catch(() => undefined);
    }
  } finally {
    await bundle.close();
  }
}

function migrationRollbackDeps(
  client: KubeClient,
  plan: Plan,
  target: Release,
  run: CalicoctlRun,
  opts: Pick<ApplyOptions, 'rolloutTimeoutMs' | 'etcd'>,
): RollbackDeps {
  return { client, plan, target, run, put: (objs) => putObjects(client, objs), rolloutTimeoutMs: opts.rolloutTimeoutMs ?? 300_000, etcd: opts.etcd };
}

/**
 * `apply PLAN --rollback`: a datastore migration this plan started (and that stopped, failed or was killed) undone
 * under the apply lock, and the journal told so. What a rollback does and when it is refused: migrate-steps.ts.
 */
async function rollbackRun(r: {
  client: KubeClient;
  plan: Plan;
  target: Release;
  reporter: Reporter;
  calicoctl: CalicoctlRun | undefined;
  journal: Journal;
  opts: ApplyOptions;
  base: Pick<ApplyResult, 'planId' | 'journal' | 'restoreCommands' | 'resumed'>;
}): Promise<ApplyResult> {
  const { client, plan, journal, opts } = r;
  if (!r.calicoctl) {
    throw new BadInputError('--rollback undoes a datastore migration (plan --migrate-datastore); this plan is not one', {
      hint: `go back to the backup with: ${r.base.restoreCommands[0]}`,
    });
  }
  if (!journal.started) throw new BadInputError(`nothing to roll back: plan ${plan.id} was never started (no journal at ${journal.path})`);
  if (opts.confirm && !(await opts.confirm(plan))) return { ...r.base, ok: false, cancelled: true, steps: [] };
  // The run that stopped may have left the lock: taken over as --resume takes it (stale, same plan) or with --break-lock.
  const lock = await ApplyLock.acquire(client, { planId: plan.id, resume: true, breakLock: opts.breakLock });
  try {
    await refuseFinishedMigration(client);
    journal.append({ event: 'remember', key: 'rollback-started', value: new Date().toISOString() });
    r.reporter.info('CNR_APPLY_MIGRATE_ROLLBACK', `plan ${plan.id}: putting calico-etcd.yaml back and unlocking etcd`);
    const summary = await rollbackMigration(migrationRollbackDeps(client, plan, r.target, r.calicoctl, opts)).catch((err) => {
      if (isErrorKind(err, 'refused')) throw err;
      return { error: errorMessage(err) };
    });
    if (typeof summary !== 'string')
      return {
        ...r.base,
        ok: false,
        steps: [],
        failed: { step: 'rollback', error: summary.error },
        rollback: { ran: true, ok: false, ...summary },
        tookOverLock: lock.tookOver,
      };
    journal.append({ event: 'remember', key: 'rolled-back', value: new Date().toISOString() });
    return { ...r.base, ok: true, steps: [], rollback: { ran: true, ok: true, summary }, tookOverLock: lock.tookOver };
  } finally {
    await lock.release().catch(() => undefined);
  }
}
