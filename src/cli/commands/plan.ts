import type { Argv } from 'yargs';
import { BadInputError, ExitCode } from '../../core/errors.js';
import { writePlan } from '../../plan/file.js';
import { buildPlan, planBlockers } from '../../plan/plan.js';
import { buildMigratePlan } from '../../plan/migrate-plan.js';
import { PLAN_FLAGS } from '../../plan/rules.js';
import { loadPlanKey, PLAN_KEY_ENV, signPlan } from '../../plan/signature.js';
import type { Plan, Strategy } from '../../plan/types.js';
import { handler, type Command } from '../context.js';
import type { Styler } from '../output.js';
import { etcdAccess, etcdOptions, type EtcdArgs } from '../etcd-options.js';
import { providerOptions, type ProviderArgs } from './backup.js';

interface PlanArgs extends ProviderArgs, EtcdArgs {
  'migrate-datastore': boolean;
  calicoctl?: string;
  'drain-timeout': string;
  'ready-timeout': string;
  to?: string;
  manifests?: string;
  strategy: Strategy;
  bundle?: string;
  out?: string;
  'reboot-nodes': boolean;
  'max-backup-age': string;
  'disk-snapshots': boolean;
  'allow-field-loss': boolean;
  'trim-installation-pools': boolean;
  'plan-key-file'?: string;
  helm?: string;
  'helm-chart'?: string;
}

export const planCommand: Command<PlanArgs> = {
  command: 'plan',
  describe: 'Plan an upgrade or downgrade of Calico: schema-aware findings, preflight and the steps `apply` will run (changes nothing)',
  builder: (y: Argv<any>) =>
    etcdOptions(providerOptions(y))
      .option('to', { type: 'string', describe: 'target Calico version (X.Y.Z); required unless --migrate-datastore' })
      .option('migrate-datastore', {
        type: 'boolean',
        default: false,
        describe:
          'etcd datastore (calico-etcd.yaml): plan the move of the same release to the Kubernetes datastore with calicoctl datastore migrate, verified before it is unlocked; apply --rollback undoes it until then',
      })
      .option('calicoctl', {
        type: 'string',
        describe: "--migrate-datastore: calicoctl of the cluster's release (default: calicoctl on PATH); apply resolves its own",
      })
      .option('manifests', {
        type: 'string',
        describe:
          'folder (or URL) with the target release manifests (default: the manifests shipped for known versions, else raw.githubusercontent.com/projectcalico/calico/vX.Y.Z/manifests/)',
      })
      .option('strategy', {
        choices: ['in-place', 'reinstall'] as const,
        default: 'in-place' as const,
        describe:
          "in-place: replace CRDs and operator, never delete data; reinstall: delete and create (the users' procedure), then restore everything from the bundle",
      })
      .option('helm', { type: 'string', describe: 'a Helm install: the helm program (default: helm on PATH); apply resolves its own' })
      .option('helm-chart', {
        type: 'string',
        describe: 'a Helm install: the target tigera-operator chart, a repository reference or a packaged chart (default projectcalico/tigera-operator)',
      })
      .option('bundle', { type: 'string', describe: 'the backup the plan relies on (default: the newest bundle of this cluster in ./cni-rewind-backups)' })
      .option('out', { type: 'string', describe: 'write the plan to this file (.yaml, or .json)' })
      .option('reboot-nodes', {
        type: 'boolean',
        default: false,
        describe:
          'add a rolling node step: one node at a time, cordon, drain (PDB-aware), reboot through its provider (--provider/--provider-module/--config/--mapping as for backup), wait Ready, uncordon',
      })
      .option('drain-timeout', { type: 'string', default: '10m', describe: '--reboot-nodes: how long a drain may wait for PodDisruptionBudgets' })
      .option('ready-timeout', { type: 'string', default: '15m', describe: '--reboot-nodes: how long a node may take to come back Ready after its reboot' })
      .option('max-backup-age', { type: 'string', default: '24h', describe: 'refuse a bundle older than this' })
      .option('disk-snapshots', {
        type: 'boolean',
        default: true,
        describe: 'require completed disk snapshots of every node in the bundle (--no-disk-snapshots to waive)',
      })
      .option(PLAN_FLAGS.dropFields, {
        type: 'boolean',
        default: false,
        describe: 'allow fields the target CRDs prune from Calico objects (they stay in the bundle)',
      })
      .option(PLAN_FLAGS.restoreDrift, {
        type: 'boolean',
        default: false,
        describe: 'put Calico objects that changed since the backup back as the bundle has them (default: keep them and say so)',
      })
      .option('plan-key-file', {
        type: 'string',
        describe: `key the plan is signed with (64 hex characters; default $${PLAN_KEY_ENV}, else ~/.config/cni-rewind/plan-signing.key, created on first use)`,
      })
      .option(PLAN_FLAGS.trimPools, {
        type: 'boolean',
        default: false,
        describe: 'keep only the first pool per IP family in the Installation when the target operator allows one (the IPPool objects stay)',
      }) as any,
  handler: handler<PlanArgs>(async (ctx, args) => {
    if (args['migrate-datastore'] && args.to)
      throw new BadInputError('--migrate-datastore keeps the release: it takes no --to', { hint: 'upgrade before or after the migration, as its own plan' });
    if (!args['migrate-datastore'] && args.calicoctl)
      ctx.reporter.warn('CNR_PLAN_CALICOCTL_UNUSED', '--calicoctl only matters with --migrate-datastore; ignored');
    if (!args.to && !args['migrate-datastore']) throw new BadInputError('Missing required argument: to', { hint: 'cni-rewind plan --to X.Y.Z' });
    const flags = Object.values(PLAN_FLAGS).filter((f) => (args as any)[f]);
    if (args['migrate-datastore'] && (args['reboot-nodes'] || args.strategy !== 'in-place' || flags.length || args.helm || args['helm-chart']))
      throw new BadInputError('--migrate-datastore takes none of --reboot-nodes, --strategy, --helm, --helm-chart or the finding flags');
    if (!args['reboot-nodes'] && (args.provider !== 'auto' || args.providerModule?.length || args.config || args.mapping)) {
      ctx.reporter.warn('CNR_PLAN_PROVIDER_UNUSED', 'provider options only matter with --reboot-nodes; ignored');
    }
    const key = loadPlanKey({ file: args['plan-key-file'], create: true, warn: (m) => ctx.reporter.warn('CNR_KEY_FILE_MODE', m) })!;
    const built = args['migrate-datastore']
      ? await buildMigratePlan(
          await ctx.client(),
          {
            bundle: args.bundle,
            manifests: args.manifests,
            maxBackupAge: args['max-backup-age'],
            diskSnapshots: args['disk-snapshots'],
            calicoctl: args.calicoctl,
            etcd: etcdAccess(args),
          },
          ctx.reporter,
        )
      : await buildPlan(
          await ctx.client(),
          {
            to: args.to!,
            manifests: args.manifests,
            strategy: args.strategy,
            bundle: args.bundle,
            rebootNodes: args['reboot-nodes'],
            rolling: {
              provider: args.provider,
              providerModules: args.providerModule,
              config: args.config,
              mapping: args.mapping,
              drainTimeout: args['drain-timeout'],
              readyTimeout: args['ready-timeout'],
            },
            diskSnapshots: args['disk-snapshots'],
            maxBackupAge: args['max-backup-age'],
            flags,
            helm: args.helm,
            helmChart: args['helm-chart'],
            etcd: etcdAccess(args),
          },
          ctx.reporter,
        );
    if ((args.helm || args['helm-chart']) && !built.helm)
      ctx.reporter.warn('CNR_PLAN_HELM_UNUSED', '--helm and --helm-chart only matter for a Helm install; ignored');
    // Signed, so that apply can tell an edited plan (a looser maxBackupAge, consent flags, findings) from this one.
    const plan = signPlan(built, key);
    if (args.out) await writePlan(args.out, plan);
    const blockers = planBlockers(plan);
    ctx.print(
      plan,
      () =>
        renderPlan(plan, ctx.style) +
        (args.out ? `\n\nPlan written to ${args.out}.${blockers.length ? '' : ` Apply it with: cni-rewind apply ${args.out}`}` : ''),
    );
    if (blockers.length) {
      ctx.host.text(`cni-rewind: apply would refuse this plan:\n${blockers.map((b) => `  - ${b}`).join('\n')}`);
      return ExitCode.Refused;
    }
    return ExitCode.Ok;
  }),
};

export function renderPlan(plan: Plan, s: Styler): string {
  const lines = [
    s.bold(`Plan ${plan.id}`),
    plan.migrate
      ? `  Calico ${plan.target.version} (${plan.current.installType} install): the ${plan.migrate.from} datastore -> the ${plan.migrate.to} datastore (strategy ${plan.strategy})`
      : `  Calico ${plan.current.version ?? '?'} (${plan.datastore === 'etcd' ? 'calico-etcd.yaml install, etcd datastore' : `${plan.current.installType} install`}) -> ${plan.target.version}: ${plan.direction}, strategy ${plan.strategy}`,
    `  target manifests ${plan.target.manifests}${plan.target.operatorImage ? ` (operator ${plan.target.operatorImage})` : ''}`,
    ...(plan.helm ? [`  ${helmLine(plan.helm)}`] : []),
    `  bundle ${plan.bundle.path} (id ${plan.bundle.id}, made ${plan.bundle.createdAt})`,
    '',
    s.bold('Preflight'),
    ...plan.preflight.map((c) => `  ${c.ok ? s.green('ok  ') : c.blocking ? s.red('FAIL') : s.yellow('warn')}  ${c.name}: ${c.detail}`),
    '',
    s.bold(`Findings (${plan.findings.length})`),
  ];
  if (!plan.findings.length) lines.push('  none: the target schemas accept every live object as it is');
  for (const f of plan.findings) {
    const sev = f.severity === 'error' ? s.red('error') : f.severity === 'warning' ? s.yellow('warning') : 'info';
    lines.push(`  [${sev}] ${f.title}`);
    if (f.objects.length) lines.push(`      objects: ${f.objects.slice(0, 10).join(', ')}${f.objects.length > 10 ? ` (+${f.objects.length - 10})` : ''}`);
    for (const d of f.details.slice(0, 12)) lines.push(`      - ${d}`);
    lines.push(`      plan (${f.action}${f.flag ? `, --${f.flag}${f.satisfied ? ' given' : ' required'}` : ''}): ${f.plan}`);
  }
  if (plan.rolling) {
    lines.push('', s.bold(`Nodes to reboot, one at a time (${plan.rolling.nodes.length})`));
    plan.rolling.nodes.forEach((n, i) => lines.push(`  ${i + 1}. ${n.node}: ${n.provider} ${n.machine}`));
    lines.push(`  drain timeout ${plan.rolling.drainTimeout}, ready timeout ${plan.rolling.readyTimeout}`);
  }
  lines.push('', s.bold('Steps'));
  plan.steps.forEach((st, i) => lines.push(`  ${i + 1}. ${st.title}: ${s.dim(st.description)}`));
  return lines.join('\n');
}

function helmLine(h: NonNullable<Plan['helm']>): string {
  const from = `Helm release ${h.namespace}/${h.release} (revision ${h.currentRevision}${h.currentChart ? `, chart ${h.currentChart}` : ''})`;
  return h.action === 'rollback'
    ? `${from}: helm rollback to revision ${h.rollbackRevision}`
    : `${from}: helm upgrade with ${h.chart} and the release's values${h.valuesEdits?.length ? `, edited: ${h.valuesEdits.join('; ')}` : ''}`;
}
