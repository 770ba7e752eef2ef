/**
 * `plan --to VERSION`: detect the install, load the target release, compute schema-aware findings, run the
 * preflight and lay out the steps. Nothing in the cluster changes.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { readCalico } from '../calico/detect.js';
import { refuseUnsupportedCalico } from '../calico/supported.js';
import { buildEtcdPlan } from './etcd-plan.js';
import type { EtcdAccessFlags } from '../calico/etcd-connection.js';
import { leavesPolicyNaming } from '../calico/policy-names.js';
import { refuseEnterprise } from '../calico/enterprise.js';
import { liveManifestTypha, refuseTyphaLeftBehind } from './typha.js';
import { judgeReconcilers, markedObjects } from '../calico/gitops.js';
import { datastoreOfObjects } from '../calico/calico-objects.js';
import { refuseManagedUpgrade } from '../calico/managed-addon.js';
import { CALICO_API_SERVICE, IPAM_LIVE_KINDS, compareVersions } from '../calico/knowledge.js';
import { loadRelease, type Release } from '../calico/release.js';
import { BadInputError, RefusedError } from '../core/errors.js';
import type { Reporter } from '../io/host.js';
import type { KubeClient } from '../kube/client.js';
import { K } from '../kube/builtin.js';
import { crdResourceType } from '../kube/discovery.js';
import { clusterUid } from '../kube/cluster-uid.js';
import { computeFindings, isManagedCrd, type LiveCalico } from './findings.js';
import { liveDataNotInBundle } from './compare.js';
import { planManifestEdits } from './manifest-custom.js';
import { reconcilerFindings } from './gitops-findings.js';
import { apiServerMoveFindings, v3UidFindings } from './apiserver-findings.js';
import { planOperatorImage } from './operator-mirror.js';
import { checkBundle, checkCluster, checkTargetPools, manifestSha256, newestBundleFor, openPlanBundle } from './preflight.js';
import { parseDuration } from '../config/config.js';
import { PLAN_FLAGS } from './rules.js';
import { planRollingNodes, type RollingSettings } from './rolling-nodes.js';
import { planHelm } from './helm-plan.js';
import { MANIFEST_STEP_TEXT, STEP_TEXT, type StepKind } from './steps.js';
import { planHeader, hasOperatorLeftovers, type Plan, type PlanStep, type Strategy } from './types.js';

export interface PlanOptions {
  to: string;
  manifests?: string;
  strategy?: Strategy;
  bundle?: string;
  rebootNodes?: boolean;
  /** How `--reboot-nodes` reaches each node's machine (the same settings as `backup`) and its timeouts. */
  rolling?: RollingSettings;
  diskSnapshots?: boolean;
  maxBackupAge?: string;
  /** A Helm install: the helm program (`--helm`, else PATH) and the target chart (`--helm-chart`). */
  helm?: string;
  helmChart?: string;
  /** Flags that allow `requires-flag` findings (e.g. `allow-field-loss`). */
  flags?: string[];
  /** `--etcd-*` for an install on the etcd datastore (etcd-plan.ts). */
  etcd?: EtcdAccessFlags;
  now?: Date;
}

export async function loadLiveCalico(client: KubeClient): Promise<LiveCalico> {
  const crds = (await client.listAll(K.crd)).filter(isManagedCrd);
  const objects = new Map<string, any[]>();
  for (const crd of crds) {
    const r = crdResourceType(crd);
    objects.set(crd.metadata.name, await client.listAll(r));
  }
  return { crds, objects };
}

export async function buildPlan(client: KubeClient, opts: PlanOptions, reporter: Reporter): Promise<Plan> {
  const strategy = opts.strategy ?? 'in-place';
  const maxBackupAge = opts.maxBackupAge ?? '24h';
  const maxAgeMs = parseDuration(maxBackupAge, '--max-backup-age');
  const flags = new Set(opts.flags ?? []);
  for (const f of flags) if (!(Object.values(PLAN_FLAGS) as string[]).includes(f)) throw new BadInputError(`unknown plan flag ${f}`);
  if (opts.rebootNodes) {
    // Bad durations are bad input: say so before looking at the cluster.
    parseDuration(opts.rolling?.drainTimeout ?? '10m', '--drain-timeout');
    parseDuration(opts.rolling?.readyTimeout ?? '15m', '--ready-timeout');
  }

  const { install, objects: calicoObjects } = await readCalico(client);
  // v3-CRD mode's data is not where the plan's steps write: refused before the bundle or manifests are read.
  refuseUnsupportedCalico(install, 'plan', 'no plan was made', { etcdHandled: true });
  // A managed Calico (AKS, GKE, RKE2, the addon manager) comes back as its provider has it: the provider's way is named.
  refuseManagedUpgrade(install.method, opts.to);
  refuseEnterprise(install.method.variant, 'no plan was made');
  // A calico-etcd.yaml install is planned with calico-etcd.yaml and checked in etcd (calico.yaml rolled over it would
  // break every CNI ADD): etcd-plan.ts, after the refusals every install gets.
  if (install.method.datastore.type === 'etcd') {
    if (opts.strategy === 'reinstall')
      throw new BadInputError('--strategy reinstall is implemented for operator installs only; an etcd install is planned in-place');
    return buildEtcdPlan(client, install, calicoObjects, { ...opts, flags: opts.flags ?? [] }, reporter);
  }
  if (install.installType === 'none') throw new BadInputError('no Calico install found in this cluster: there is nothing to upgrade or downgrade');
  // Refused before anything else is looked at (bundle, manifests): the answer does not depend on them.
  if (install.installType === 'manifest' && opts.strategy === 'reinstall') {
    throw new BadInputError('--strategy reinstall is implemented for operator installs only; use in-place for a calico.yaml install');
  }
  reporter.info('CNR_PLAN_CURRENT', `current: Calico ${install.version ?? 'unknown version'} (${install.installType} install)`);
  const target: Release = await loadRelease(opts.to, { manifests: opts.manifests, need: install.installType === 'operator' ? 'operator' : 'manifest' });
  reporter.info('CNR_PLAN_TARGET', `target: Calico ${target.version} from ${target.origin}`);
  if (install.installType === 'manifest') refuseTyphaLeftBehind(await liveManifestTypha(client), target.calicoManifest, target.version);
  // An air-gapped install pulls the operator from a mirror: the target's comes from there too, or the plan refuses.
  const operatorImage = install.installType === 'operator' ? planOperatorImage({ image: install.operatorImage, version: install.version }, target) : undefined;
  const direction = !install.version
    ? 'upgrade'
    : compareVersions(target.version, install.version) < 0
      ? 'downgrade'
      : compareVersions(target.version, install.version) > 0
        ? 'upgrade'
        : 'same';
  if (direction === 'same') throw new BadInputError(`the cluster already runs Calico ${target.version}`);

  const uid = await clusterUid(client);
  const bundlePath = opts.bundle ?? (await newestBundleFor(uid));
  if (!bundlePath) {
    throw new RefusedError('no bundle of this cluster found: a plan relies on a verified backup', {
      hint: 'run `cni-rewind backup` (or `cni-rewind export` with --no-disk-snapshots) first, or pass --bundle PATH',
    });
  }
  const bundle = await openPlanBundle(bundlePath);
  try {
    // Argo CD / Flux owners, judged from the objects detectCalico read: said here, refused by apply while they would
    // revert the change (--owner-suspended). Doctor's preflight judges the same owners and datastore, not a new read.
    const reconcilers = await judgeReconcilers(client, markedObjects(calicoObjects), install.method);
    const cluster = await checkCluster(client, !!opts.rebootNodes, { reconcilers, datastore: datastoreOfObjects(calicoObjects) });
    const rolling = opts.rebootNodes ? await planRollingNodes(client, opts.rolling ?? {}, reporter) : undefined;
    const preflight = [
      ...(await checkBundle(bundle, { uid, maxAgeMs, maxBackupAge, diskSnapshots: opts.diskSnapshots !== false, nodes: cluster.nodes, now: opts.now })),
      ...cluster.checks,
      ...(rolling?.checks ?? []),
    ];
    const live = await loadLiveCalico(client);
    const { findings, installation } = computeFindings(live, target, install, flags);
    findings.push(...reconcilerFindings(reconcilers));
    if (install.installType === 'operator') findings.push(...apiServerMoveFindings(live, target, install));
    findings.push(...v3UidFindings(target, install, await servesCalicoV3(client)));
    if (install.installType === 'operator') preflight.push(await checkTargetPools(client, target, installation, cluster.state));
    // Objects changed since the backup (by people or by an operator, as in #9100): the plan names them and either
    // keeps them as they are or, with --restore-drift, puts them back from the bundle while the operator is paused.
    // IPAM objects change with every pod: live state, not drift (restore never writes them over the cluster's).
    const drifted = (await liveDataNotInBundle(client, bundle)).filter(
      (d) => d.problem === 'changed' && !d.object.startsWith('Installation/') && !IPAM_LIVE_KINDS.has(d.object.split('/')[0]!),
    );
    const restoreDrift = flags.has(PLAN_FLAGS.restoreDrift);
    if (drifted.length) {
      findings.push({
        id: 'changed-since-backup',
        severity: 'warning',
        title: `${drifted.length} Calico object(s) changed since the backup ${bundle.manifest.id}`,
        objects: drifted.map((d) => d.object),
        details: drifted.map((d) => `${d.object}: ${d.detail ?? 'changed'}`),
        action: restoreDrift ? 'transform' : 'keep',
        plan: restoreDrift
          ? 'put back as the bundle has them while the operator is paused (step "restore objects changed since the backup")'
          : 'kept as they are now; the final verification skips them (pass --restore-drift to put them back as in the bundle)',
      });
    }
    // calico.yaml installs: the user's edits of calico.yaml are carried into the target's (see manifest-custom.ts).
    const edits = install.installType === 'manifest' ? await planManifestEdits(client, install.version, opts.manifests) : undefined;
    if (edits?.finding) findings.push(edits.finding);
    if (operatorImage?.finding) findings.push(operatorImage.finding);
    // A Helm install is changed with helm (helm-plan.ts), refused here before a plan exists when it cannot be.
    const helm =
      install.method.method === 'operator-helm' ? await planHelm(client, install.method.helm, { ...opts, strategy, direction, installation }) : undefined;
    const now = opts.now ?? new Date();
    const plan: Plan = {
      ...planHeader(now, randomBytes(2).toString('hex')),
      cluster: { uid, name: client.connection.clusterName, server: client.connection.server },
      current: { installType: install.installType, version: install.version, operatorImage: install.operatorImage },
      target: {
        version: target.version,
        operatorImage: operatorImage?.image ?? target.operatorImage,
        manifests:
          path.isAbsolute(target.origin) || /^https?:/.test(target.origin)
            ? opts.manifests && /^https?:/.test(opts.manifests)
              ? opts.manifests
              : target.origin
            : path.resolve(target.origin),
        files: Object.fromEntries(Object.entries(target.files).map(([k, f]) => [k, { sha256: f.sha256 }])),
      },
      direction,
      strategy,
      options: { rebootNodes: !!opts.rebootNodes, diskSnapshots: opts.diskSnapshots !== false, maxBackupAge, flags: [...flags] },
      bundle: { path: path.resolve(bundlePath), id: bundle.manifest.id, manifestSha256: manifestSha256(bundle), createdAt: bundle.manifest.createdAt },
      preflight,
      findings,
      transforms: { installation, ...(edits?.transform ? { manifest: edits.transform } : {}) },
      drift: drifted.map((d) => d.object),
      ...(reconcilers.length ? { reconcilers } : {}),
      ...(rolling ? { rolling: rolling.rolling } : {}),
      ...(helm ? { helm } : {}),
      steps: stepsFor(install.installType === 'operator' ? 'operator' : 'manifest', strategy, target, {
        restoreDrift: restoreDrift && drifted.length > 0,
        rebootNodes: !!rolling,
        removeLeftovers: hasOperatorLeftovers(installation),
        renamePolicies: leavesPolicyNaming(install.version, target.version),
        helm: helm && { action: helm.action, cleanup: installationCleanup(installation) },
      }),
    };
    // A calico.yaml install's steps say what they do there (no operator; the workloads are in kube-system).
    if (install.installType === 'manifest') plan.steps = plan.steps.map((s) => ({ ...s, ...MANIFEST_STEP_TEXT[s.id] }));
    return plan;
  } finally {
    await bundle.close();
  }
}

/** True when the plan can be applied: no blocking preflight failure, no refusing finding. */
export function planBlockers(plan: Plan): string[] {
  return [
    ...plan.preflight.filter((c) => c.blocking && !c.ok).map((c) => `preflight ${c.name}: ${c.detail}`),
    ...plan.findings.filter((f) => f.action === 'refuse' || (f.action === 'requires-flag' && !f.satisfied)).map((f) => `${f.title}: ${f.plan}`),
  ];
}

function step(id: StepKind): PlanStep {
  const t = STEP_TEXT[id];
  return { id, title: t.title, description: t.description };
}

export function stepsFor(
  install: 'operator' | 'manifest',
  strategy: Strategy,
  target: Release,
  opts: {
    restoreDrift?: boolean;
    rebootNodes?: boolean;
    removeLeftovers?: boolean;
    /** A downgrade from 3.32+ below it (calico/policy-names.ts): policies renamed back once the rollout is done. */
    renamePolicies?: boolean;
    helm?: { action: 'upgrade' | 'rollback'; cleanup: boolean };
  } = {},
): PlanStep[] {
  // Right before the Installation is rewritten for the target (a Helm plan's cleanup included: leftovers imply it).
  const leftovers = (ids: StepKind[]): StepKind[] =>
    opts.removeLeftovers ? ids.flatMap((id) => (id === 'transform-installation' ? ['remove-operator-leftovers' as const, id] : [id])) : ids;
  // Policies are renamed once the target's kube-controllers runs (3.32's would rename them again), before the data
  // is verified. Nodes are rebooted last: only once the new version runs and the data is proven intact, as in the
  // users' procedure.
  const renamed = (ids: StepKind[]): StepKind[] =>
    opts.renamePolicies ? ids.flatMap((id) => (id === 'wait-rollout' ? [id, 'rename-policies-back' as const] : [id])) : ids;
  const withNodes = (ids: StepKind[]) => renamed(opts.rebootNodes ? ids.concat('reboot-nodes') : ids).map(step);
  if (opts.helm && install === 'operator') return withNodes(leftovers(helmStepIds(strategy, opts.helm, !!opts.restoreDrift)));
  if (install === 'manifest') {
    if (!target.calicoManifest) throw new BadInputError(`the cluster has a manifest install and the ${target.version} manifests have no calico.yaml`);
    if (strategy === 'reinstall')
      throw new BadInputError('--strategy reinstall is implemented for operator installs only; use in-place for a calico.yaml install');
    return withNodes(['preflight', 'apply-crds', 'apply-calico-manifest', 'wait-rollout', 'verify-data']);
  }
  if (strategy === 'reinstall') {
    return withNodes(
      leftovers([
        'preflight',
        'pause-operator',
        'remove-old',
        'install-target',
        'restore-data',
        'transform-installation',
        'resume-operator',
        'wait-rollout',
        'verify-data',
      ]),
    );
  }
  const ids: StepKind[] = leftovers([
    'preflight',
    'pause-operator',
    'apply-crds',
    'apply-operator',
    'transform-installation',
    'resume-operator',
    'wait-rollout',
    'verify-data',
  ]);
  if (opts.restoreDrift) ids.splice(ids.indexOf('resume-operator'), 0, 'restore-drift');
  return withNodes(ids);
}

/**
 * The Installation edits a Helm plan makes after helm (transform-installation): fields the target CRD lacks (the
 * newer operator's defaults) and the newer operator's finalizers and TigeraStatuses, none of them Helm's values.
 */
export function installationCleanup(t: Plan['transforms']['installation']): boolean {
  return t.removeFields.length > 0 || hasOperatorLeftovers(t);
}

/**
 * A Helm install's steps. Upgrade: the target CRDs first, then helm upgrade (Calico's procedure: the new operator
 * starts on CRDs it knows). Rollback: helm rollback first, then the target CRDs, so the older operator meets the
 * newer CRDs for a moment (the state an upgrade by the docs passes through) rather than the newer operator older ones.
 * The operator is not paused: helm writes its Deployment (replicas included) and starts the target operator itself.
 */
export function helmStepIds(strategy: Strategy, helm: { action: 'upgrade' | 'rollback'; cleanup: boolean }, restoreDrift: boolean): StepKind[] {
  if (strategy === 'reinstall') throw new BadInputError('--strategy reinstall is not implemented for a Helm install; use in-place (helm upgrade or rollback)');
  const ids: StepKind[] = helm.action === 'upgrade' ? ['preflight', 'apply-crds', 'helm-upgrade'] : ['preflight', 'helm-rollback', 'apply-crds'];
  if (restoreDrift) ids.splice(ids.indexOf(helm.action === 'upgrade' ? 'helm-upgrade' : 'helm-rollback'), 0, 'restore-drift');
  if (helm.cleanup) ids.push('transform-installation');
  return [...ids, 'wait-rollout', 'verify-data'];
}

/** Whether the Calico API server is registered for projectcalico.org/v3 (its objects are then in the Kubernetes API). */
async function servesCalicoV3(client: KubeClient): Promise<boolean> {
  return (await client.getOrUndefined(K.apiService, undefined, CALICO_API_SERVICE)) !== undefined;
}
