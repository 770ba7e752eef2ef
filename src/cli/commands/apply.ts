import type { Argv } from 'yargs';
import { ExitCode, RefusedError } from '../../core/errors.js';
import { applyPlan, type ApplyResult } from '../../apply/apply.js';
import { readPlan } from '../../plan/file.js';
import { checkPlanSignature, loadPlanKey, PLAN_KEY_ENV } from '../../plan/signature.js';
import { handler, type Command } from '../context.js';
import { renderTable } from '../output.js';
import { etcdAccess, etcdOptions, type EtcdArgs } from '../etcd-options.js';
import { renderPlan } from './plan.js';

interface ApplyArgs extends EtcdArgs {
  plan: string;
  resume: boolean;
  'break-lock': boolean;
  'auto-rollback': boolean;
  rollback: boolean;
  calicoctl?: string;
  'provider-module'?: string[];
  config?: string;
  mapping?: string;
  'plan-key-file'?: string;
  'owner-suspended': boolean;
  helm?: string;
  'helm-chart'?: string;
}

export const applyCommand: Command<ApplyArgs> = {
  command: 'apply <plan>',
  describe: 'Execute a plan: journaled, resumable steps under a cluster lock; stops with the restore commands if a step fails',
  builder: (y: Argv<any>) =>
    etcdOptions(y)
      .positional('plan', { type: 'string', describe: 'plan file written by `cni-rewind plan --out`' })
      .option('resume', { type: 'boolean', default: false, describe: 'continue an interrupted run from its journal (steps already done are not repeated)' })
      .option('break-lock', {
        type: 'boolean',
        default: false,
        describe: 'take the cluster lock even if another run holds it (only when that run is gone for good)',
      })
      .option('auto-rollback', {
        type: 'boolean',
        default: false,
        describe: "when a step fails, restore the Calico resources from the plan's bundle (a datastore migration: roll it back as --rollback does)",
      })
      .option('rollback', {
        type: 'boolean',
        default: false,
        describe: 'undo a datastore migration this plan started: calico-etcd.yaml back, etcd unlocked (refused once the Kubernetes datastore is unlocked)',
      })
      .option('calicoctl', { type: 'string', describe: "a datastore migration: calicoctl of the cluster's release (default: calicoctl on PATH)" })
      .option('owner-suspended', {
        type: 'boolean',
        default: false,
        describe: 'go ahead although an Argo CD application or Flux Kustomization/HelmRelease reconciles Calico (you suspended it: apply names the command)',
      })
      // A plan file is input: the code and files its --reboot-nodes step would load are used only when named here too.
      .option('provider-module', { type: 'string', array: true, describe: 'allow a provider module the plan names (--reboot-nodes plans); repeatable' })
      .option('config', { type: 'string', describe: 'allow the config file the plan names (--reboot-nodes plans)' })
      .option('mapping', { type: 'string', describe: 'allow the node mapping file the plan names (--reboot-nodes plans)' })
      // A Helm install's plan: the program and the chart are this command line's, never the plan file's.
      .option('helm', { type: 'string', describe: 'the helm program a Helm install is changed with (default: helm on PATH)' })
      .option('helm-chart', {
        type: 'string',
        describe: 'the tigera-operator chart the plan upgrades with, given again (default projectcalico/tigera-operator at the target version)',
      })
      .option('plan-key-file', {
        type: 'string',
        describe: `key the plan was signed with (default $${PLAN_KEY_ENV}, else ~/.config/cni-rewind/plan-signing.key); an unsigned or edited plan is refused`,
      }) as any,
  handler: handler<ApplyArgs>(async (ctx, args) => {
    const plan = await readPlan(args.plan);
    // Before anything else reads the plan's values: its policy (max backup age, snapshots, consent flags) is the signer's.
    checkPlanSignature(plan, args.plan, loadPlanKey({ file: args['plan-key-file'], warn: (m) => ctx.reporter.warn('CNR_KEY_FILE_MODE', m) }));
    const result = await applyPlan(
      await ctx.client(),
      plan,
      {
        resume: args.resume,
        breakLock: args['break-lock'],
        autoRollback: args['auto-rollback'],
        rollback: args.rollback,
        planPath: shellWord(args.plan),
        ownerSuspended: args['owner-suspended'],
        etcd: etcdAccess(args),
        given: {
          providerModules: args['provider-module'],
          config: args.config,
          mapping: args.mapping,
          helm: { helm: args.helm, helmChart: args['helm-chart'], kubeconfig: args.kubeconfig, context: args.context, as: args.as, asGroups: args['as-group'] },
          calicoctl: { calicoctl: args.calicoctl, kubeconfig: args.kubeconfig, context: args.context, as: args.as },
        },
        confirm: async (p) => {
          if (args.yes) return true;
          ctx.host.text(renderPlan(p, ctx.style) + '\n');
          if (args.rollback) return ctx.reporter.confirm(`Roll back the datastore migration of plan ${p.id} on cluster ${p.cluster.name}?`);
          return ctx.reporter.confirm(`Apply plan ${p.id} to cluster ${p.cluster.name}${args.resume ? ' (resume)' : ''}?`);
        },
        onStarted: (journal, lock) => {
          // Ctrl-C: record it, give the lock back, stop. The step in flight is re-run by --resume.
          const stop = (sig: NodeJS.Signals) => {
            journal.append({ event: 'interrupted', signal: sig });
            void lock.release().finally(() => {
              ctx.host.text(`cni-rewind: interrupted; continue with: cni-rewind apply ${args.plan} --resume`);
              process.exit(130);
            });
          };
          process.once('SIGINT', stop);
          process.once('SIGTERM', stop);
        },
      },
      ctx.reporter,
    );
    if (result.cancelled) throw new RefusedError('not confirmed: nothing was changed', { hint: 'rerun with --yes to apply without asking' });
    ctx.print(result, () => renderResult(result, args.plan));
    if (result.ok) return ExitCode.Ok;
    // The apply lock lost (taken over, refused, unrenewable) is the environment's doing: exit 4.
    if (result.failed?.lockLost) return ExitCode.Environment;
    // A step that stopped on a safety check (the preflight run again, a node now on another machine) is a refusal.
    return result.failed?.refused ? ExitCode.Refused : ExitCode.Partial;
  }),
};

/** The plan path as a shell word (quoted only when it needs to be). */
const shellWord = (s: string) => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

function renderResult(r: ApplyResult, planPath: string): string {
  const lines = [
    renderTable(r.steps, [
      { header: 'step', value: (s) => s.id },
      { header: 'status', value: (s) => s.status },
      { header: 'seconds', value: (s) => (s.ms !== undefined ? (s.ms / 1000).toFixed(1) : '') },
      { header: 'result', value: (s) => s.error ?? s.summary ?? '' },
    ]),
  ];
  if (r.nodes)
    lines.push(
      '',
      renderTable(r.nodes, [
        { header: 'node', value: (n) => n.node },
        { header: 'provider', value: (n) => n.provider },
        { header: 'machine', value: (n) => n.machine },
        { header: 'reboot', value: (n) => n.phase },
      ]),
    );
  lines.push('', `journal ${r.journal}`);
  if (r.ok && r.rollback?.summary) {
    lines.push(`plan ${r.planId} rolled back: ${r.rollback.summary}`);
    return lines.join('\n');
  }
  if (r.ok) {
    lines.push(`plan ${r.planId} applied${r.resumed ? ' (resumed)' : ''}`);
    return lines.join('\n');
  }
  lines.push(
    r.failed?.notStarted
      ? `plan ${r.planId} stopped before step ${r.failed.step}: ${r.failed.error}`
      : `plan ${r.planId} stopped at step ${r.failed?.step}: ${r.failed?.error}`,
  );
  if (r.rollback)
    lines.push(
      r.rollback.ok
        ? (r.rollback.summary ?? 'Calico resources were restored from the bundle (--auto-rollback)')
        : `the ${r.rollback.summary === undefined && !r.failed?.step.startsWith('rollback') ? 'automatic resource restore' : 'rollback'} failed: ${r.rollback.error}`,
    );
  lines.push(
    '',
    'To continue after fixing the cause:',
    // The real plan path, as the Ctrl-C message prints it: a literal `PLAN` could not be pasted as it is.
    `  cni-rewind apply ${shellWord(planPath)} --resume`,
    '',
    'To go back to the backup:',
    ...r.restoreCommands.map((c) => `  ${c}`),
  );
  return lines.join('\n');
}
