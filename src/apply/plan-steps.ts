/**
 * The steps of a plan, as idempotent actions the executor runs. Each step can run again after an interruption
 * without harm; the one value that must not be re-read after it was changed (the operator's replica count before
 * the pause) is kept in the journal.
 */
import type { Bundle } from '../bundle/reader.js';
import type { EtcdAccessFlags } from '../calico/etcd-connection.js';
import { detectCalico } from '../calico/detect.js';
import { OPERATOR_DEPLOYMENT, OPERATOR_NAMESPACE } from '../calico/knowledge.js';
import type { Release } from '../calico/release.js';
import { pruneUnknownFields } from '../calico/schema.js';
import { EnvironmentError, RefusedError } from '../core/errors.js';
import type { Reporter } from '../io/host.js';
import type { KubeClient } from '../kube/client.js';
import { retryOnConflict } from '../kube/conflict.js';
import { K } from '../kube/builtin.js';
import { clusterUid } from '../kube/cluster-uid.js';
import { crdResourceType } from '../kube/discovery.js';
import { waitCrdsEstablished } from '../kube/manifests.js';
import { pool } from '../util/pool.js';
import { ResourceResolver } from '../kube/resolver.js';
import type { KubeObject } from '../kube/types.js';
import { bundleDataPresent } from '../plan/compare.js';
import { crdsTheTargetOperatorMisreads } from '../plan/crd-findings.js';
import { transformInstallation } from '../plan/findings.js';
import { checkBundle, checkCluster, checkTargetPools, refuseOnFailure } from '../plan/preflight.js';
import { parseDuration } from '../config/config.js';
import { applyManifestEdits, editCount } from '../plan/manifest-custom.js';
import { withPlannedOperatorImage } from '../plan/operator-mirror.js';
import { isStepKind, type StepKind } from '../plan/steps.js';
import type { Plan, PreflightCheck } from '../plan/types.js';
import type { ExecStep, StepRuntime } from './executor.js';
import { restoreResources } from '../restore/restore.js';
import { waitForOperatorPodsGone } from '../restore/guards.js';
import { renamePoliciesBack } from './policy-rename.js';
import { removeOperatorLeftovers } from './operator-leftovers.js';
import { helmRollback, helmUpgrade, type HelmRun } from './helm-steps.js';
import { rebootNodes } from './reboot-nodes.js';
import { copyToKubernetes, lockEtcd, unlockKubernetes, verifyMigrated, type CalicoctlRun } from './migrate-steps.js';
import { applyCalicoEtcdManifest, verifyEtcdData, waitEtcdRollout } from './etcd-steps.js';
import { removeOld } from './remove-old.js';
import { TIGERA_STATUS, waitRollout } from './wait-rollout.js';

export interface StepDeps {
  client: KubeClient;
  plan: Plan;
  target: Release;
  bundle: Bundle;
  reporter: Reporter;
  /** A Helm install's helm run, resolved and checked by apply (helm-steps.ts prepareHelm). */
  helm?: HelmRun;
  /** Rollout wait budget (default 300 s). */
  rolloutTimeoutMs?: number;
  /** A datastore migration's calicoctl, resolved and checked by apply (migrate-steps.ts prepareCalicoctl). */
  calicoctl?: CalicoctlRun;
  /** `--etcd-*` of apply's command line (never the plan's): Calico's etcd when calico-config and its Secret do not say it all. */
  etcd?: EtcdAccessFlags;
}

const INSTALLATION_CRD = 'installations.operator.tigera.io';

/** What a step does; it returns the one-line summary the journal and the output show. */
export type StepImpl = (deps: StepDeps, rt: StepRuntime) => Promise<string | void>;

/** One implementation per kind of the step catalogue (plan/steps.ts): a kind without one does not compile. */
export const STEP_IMPLEMENTATIONS: { readonly [K in StepKind]: StepImpl } = {
  preflight: (deps) => preflight(deps),
  'pause-operator': (deps, rt) => pauseOperator(deps, rt),
  'apply-crds': (deps) => applyCrds(deps),
  'apply-operator': (deps) => applyOperator(deps),
  'apply-calico-manifest': (deps) =>
    deps.plan.datastore === 'etcd'
      ? applyCalicoEtcdManifest(deps.client, deps.plan, deps.target, (o) => putObjects(deps.client, o))
      : applyCalicoManifest(deps),
  'remove-operator-leftovers': (deps) => removeOperatorLeftovers(deps.client, deps.target),
  'helm-upgrade': (deps) => helmUpgrade(deps.client, deps.helm, deps.plan),
  'helm-rollback': (deps) => helmRollback(deps.client, deps.helm),
  'transform-installation': (deps) => transformInstallationStep(deps),
  'remove-old': (deps) => removeOld(deps.client, deps.bundle, deps.target, deps.reporter),
  'install-target': async (deps) => `${await applyCrds(deps)}; ${await applyOperator(deps)}`,
  'restore-data': (deps) => restoreData(deps),
  'restore-drift': (deps) => restoreDrift(deps),
  'resume-operator': (deps, rt) => resumeOperator(deps, rt),
  'wait-rollout': (deps) =>
    (deps.plan.datastore === 'etcd' ? waitEtcdRollout : waitRollout)(deps.client, deps.plan, deps.target, deps.rolloutTimeoutMs ?? 300_000),
  'rename-policies-back': (deps) => renamePoliciesBack(deps.client, deps.target.version),
  'verify-data': (deps) => (deps.plan.datastore === 'etcd' ? verifyEtcdData(deps.client, deps.bundle, deps.plan, deps.reporter, deps.etcd) : verifyData(deps)),
  'migrate-lock-etcd': (deps, rt) => lockEtcd(deps.client, deps.calicoctl, rt, deps.etcd),
  'migrate-copy': (deps, rt) => copyToKubernetes(deps.client, deps.calicoctl, rt, deps.etcd),
  'verify-migrated': (deps, rt) => verifyMigrated(deps.client, deps.calicoctl, rt, deps.etcd),
  'migrate-unlock': (deps) => unlockKubernetes(deps.calicoctl),
  'reboot-nodes': (deps, rt) => {
    if (!deps.plan.rolling?.nodes)
      throw new RefusedError('the plan has a reboot-nodes step but no node list (plan.rolling): make a new plan with --reboot-nodes');
    return rebootNodes(deps.client, deps.plan.rolling, rt);
  },
};

export function buildSteps(deps: StepDeps): ExecStep[] {
  return deps.plan.steps.map((s) => {
    // The ids come from a file: typed as the catalogue's kinds, checked again here.
    if (!isStepKind(s.id)) throw new RefusedError(`the plan has a step this cni-rewind does not know: ${String(s.id)}`);
    const impl = STEP_IMPLEMENTATIONS[s.id];
    return { id: s.id, title: s.title, run: (rt: StepRuntime) => impl(deps, rt) };
  });
}

async function preflight(deps: StepDeps): Promise<string> {
  const checks = await preflightChecks(deps, 'apply');
  return `${checks.filter((c) => c.ok).length}/${checks.length} checks passed`;
}

/**
 * The preflight, from the cluster and the bundle (never from what the plan file says it found): cluster
 * identity, the bundle verifies, is the planned one, of this cluster and recent, snapshots, nodes Ready, and the
 * cluster runs the version the plan was made for. `resumeOnly`: what still must hold when a run is resumed
 * (identity and bundle; not its age nor the nodes, which a half-done change may have in flux). Refuses (exit 5).
 */
export async function preflightChecks(
  { client, plan, bundle, target }: Pick<StepDeps, 'client' | 'plan' | 'bundle' | 'target'>,
  what: string,
  resumeOnly = false,
): Promise<PreflightCheck[]> {
  const uid = await clusterUid(client);
  if (uid !== plan.cluster.uid)
    throw new RefusedError(`this plan was made for cluster ${plan.cluster.name} (uid ${plan.cluster.uid}), not this one (uid ${uid})`);
  const cluster = await checkCluster(client, plan.options.rebootNodes);
  const checks = [
    ...(await checkBundle(bundle, {
      uid,
      maxAgeMs: parseDuration(plan.options.maxBackupAge, 'maxBackupAge'),
      maxBackupAge: plan.options.maxBackupAge,
      diskSnapshots: plan.options.diskSnapshots,
      nodes: cluster.nodes,
      expectSha256: plan.bundle.manifestSha256,
    })),
    ...cluster.checks,
  ].filter((c) => !resumeOnly || ['bundle-verifies', 'bundle-is-the-planned-one', 'bundle-of-this-cluster'].includes(c.name));
  if (!resumeOnly && plan.current.installType === 'operator') checks.push(await checkTargetPools(client, target, plan.transforms.installation, cluster.state));
  refuseOnFailure(checks, what);
  if (resumeOnly) return checks;
  const now = await detectCalico(client);
  if (now.version !== plan.current.version && now.version !== plan.target.version) {
    throw new RefusedError(`the cluster runs Calico ${now.version ?? 'unknown'}, the plan was made for ${plan.current.version}: make a new plan`);
  }
  return checks;
}

async function pauseOperator({ client }: StepDeps, rt: StepRuntime): Promise<string> {
  const dep = await client.getOrUndefined(K.deployment, OPERATOR_NAMESPACE, OPERATOR_DEPLOYMENT);
  let prior = rt.recall<number>('operatorReplicas');
  if (prior === undefined) {
    // Remember before scaling: after a crash the Deployment says 0, which is not what to go back to.
    prior = dep?.spec?.replicas ?? 1;
    rt.remember('operatorReplicas', prior);
  }
  if (!dep) return 'no operator Deployment (nothing to pause)';
  await client.mergePatch(K.deployment, OPERATOR_NAMESPACE, OPERATOR_DEPLOYMENT, { spec: { replicas: 0 } });
  await client.waitFor(
    'the operator pods to stop',
    async () => {
      const d = await client.get(K.deployment, OPERATOR_NAMESPACE, OPERATOR_DEPLOYMENT);
      return (d.status?.replicas ?? 0) === 0 ? true : undefined;
    },
    { timeoutMs: 180_000, intervalMs: 500 },
  );
  // status.replicas is 0 as soon as the pod is terminating, while its operator still runs: wait for the pod itself.
  await waitForOperatorPodsGone(client, dep);
  return `operator scaled from ${prior} to 0 replicas`;
}

async function resumeOperator({ client }: StepDeps, rt: StepRuntime): Promise<string> {
  const prior = rt.recall<number>('operatorReplicas') ?? 1;
  if (!(await client.getOrUndefined(K.deployment, OPERATOR_NAMESPACE, OPERATOR_DEPLOYMENT)))
    throw new EnvironmentError('the operator Deployment is missing after the target manifest was applied');
  // The old operator's last word (TigeraStatus calico Available) would otherwise pass wait-rollout before the
  // target operator has looked at anything: delete it while no operator runs; the target operator writes its own.
  await client.delete(TIGERA_STATUS, undefined, 'calico');
  await client.mergePatch(K.deployment, OPERATOR_NAMESPACE, OPERATOR_DEPLOYMENT, { spec: { replicas: prior } });
  return `operator scaled back to ${prior} replicas`;
}

/**
 * Write an object so that it ends up exactly as given: create it, or replace the live one (PUT with its
 * resourceVersion). Not server-side apply: with another field manager owning the newer version's fields, an apply
 * would merge the two versions (e.g. a 3.27 CRD keeping 3.28 schema properties).
 */
async function putExact(client: KubeClient, type: Parameters<KubeClient['create']>[0], obj: KubeObject): Promise<'created' | 'replaced'> {
  return retryOnConflict(async () => {
    const live = await client.getOrUndefined(type, obj.metadata.namespace, obj.metadata.name);
    if (!live) {
      await client.create(type, obj);
      return 'created';
    }
    const md = { ...obj.metadata, resourceVersion: live.metadata.resourceVersion };
    // Keep what other tools put on the object's metadata; the spec is the release's.
    md.labels = { ...live.metadata.labels, ...obj.metadata.labels };
    md.annotations = { ...live.metadata.annotations, ...obj.metadata.annotations };
    await client.replace(type, { ...obj, metadata: md });
    return 'replaced';
  });
}

async function applyCrds({ client, plan, target, reporter }: StepDeps): Promise<string> {
  // A manifest install gets calico.yaml's CRDs even when the release folder also holds tigera-operator.yaml
  // (whose operator.tigera.io CRDs a calico.yaml install never had).
  const crds =
    plan.current.installType === 'manifest' && target.calicoManifest ? target.calicoManifest.filter((o) => o.kind === 'CustomResourceDefinition') : target.crds;
  let created = 0;
  let done = 0;
  await pool(crds, 4, async (crd) => {
    if ((await putExact(client, K.crd, crd)) === 'created') created++;
    reporter.progress({ id: 'apply-crds', label: 'CRDs', current: ++done, total: crds.length });
  });
  await waitCrdsEstablished(
    client,
    crds.map((c) => c.metadata.name),
    120_000,
  );
  const removed = plan.current.installType === 'operator' ? await removeCrdsTheTargetOperatorMisreads(client, target) : [];
  return `${crds.length} CRDs of ${target.version} in place (${created} new); ${removed.length ? `deleted the empty ${removed.join(', ')} (the ${target.operatorImage ?? target.version} operator would misread the cluster while they are served)` : 'none deleted'}`;
}

/**
 * Delete the CRDs the target lacks whose mere presence changes what the target operator does (plan/crd-findings.ts),
 * read again from the cluster; one that holds objects is never deleted (the plan refused it; refused here too).
 */
async function removeCrdsTheTargetOperatorMisreads(client: KubeClient, target: Release): Promise<string[]> {
  const doomed = crdsTheTargetOperatorMisreads(await client.listAll(K.crd), target);
  for (const d of doomed) {
    const crd = await client.getOrUndefined(K.crd, undefined, d.crd);
    if (!crd) continue;
    for await (const o of client.listItems(crdResourceType(crd), { limit: 1 })) {
      throw new RefusedError(`CRD ${d.crd} holds objects (${o.kind}/${o.metadata.name}): not deleted; ${d.effect}`);
    }
    await client.delete(K.crd, undefined, d.crd);
  }
  const names = doomed.map((d) => d.crd);
  await client.waitFor(
    `the CRDs ${names.join(', ')} to be gone`,
    async () => ((await client.listAll(K.crd)).some((c) => names.includes(c.metadata.name)) ? undefined : true),
    { timeoutMs: 120_000, intervalMs: 500 },
  );
  return names;
}

export async function putObjects(client: KubeClient, objs: KubeObject[]): Promise<number> {
  const resolver = new ResourceResolver(client);
  for (const obj of objs) {
    const type = await resolver.forObject(obj);
    if (!type) throw new EnvironmentError(`the cluster does not serve ${obj.apiVersion} ${obj.kind} (${obj.metadata.name})`);
    if (obj.kind === 'Namespace') {
      if (!(await client.getOrUndefined(type, undefined, obj.metadata.name))) await client.create(type, obj);
      continue;
    }
    await putExact(client, type, obj);
  }
  return objs.length;
}

async function applyOperator({ client, plan, target }: StepDeps): Promise<string> {
  // The operator image the plan chose: the release's, or the same under the live install's mirror (operator-mirror.ts).
  const objs = withPlannedOperatorImage(target.operatorObjects, plan.target.operatorImage, target.operatorImage).map((o) => {
    if (o.kind !== 'Deployment' || o.metadata.name !== OPERATOR_DEPLOYMENT) return o;
    // Keep the operator paused: resume-operator brings the remembered replica count back.
    return { ...o, spec: { ...o.spec, replicas: 0 } };
  });
  const n = await putObjects(client, objs);
  return `${n} objects of tigera-operator.yaml applied (operator ${plan.target.operatorImage ?? target.operatorImage}, kept at 0 replicas)`;
}

async function applyCalicoManifest({ client, plan, target }: StepDeps): Promise<string> {
  // The admins' edits of calico.yaml found by the plan (env, calico-config, registry, probe commands) are written
  // into the target's: replacing the objects as released would undo them (see plan/manifest-custom.ts).
  const edits = plan.transforms.manifest;
  const objs = applyManifestEdits(
    (target.calicoManifest ?? []).filter((o) => o.kind !== 'CustomResourceDefinition'),
    edits,
  );
  const n = await putObjects(client, objs);
  const carried = editCount(edits);
  return `${n} objects of calico.yaml applied${carried ? ` with ${carried} edit(s) of the ${edits!.from} calico.yaml carried over` : ''}`;
}

async function transformInstallationStep({ client, plan }: StepDeps): Promise<string> {
  const crd = await client.getOrUndefined(K.crd, undefined, INSTALLATION_CRD);
  if (!crd) return 'no Installation CRD';
  const type = crdResourceType(crd);
  // A Helm plan runs this with the target operator running (helm started it): its status writes conflict, read again.
  const written = await retryOnConflict(async () => {
    const live = await client.getOrUndefined(type, undefined, 'default');
    if (!live) return false;
    const desired = pruneUnknownFields(transformInstallation(live, plan.transforms.installation), crd);
    delete desired.status;
    delete desired.metadata.managedFields;
    // Strict validation proves the result is valid for the target CRD (it fails instead of pruning silently).
    await client.replace(type, desired, { fieldValidation: 'Strict' });
    return true;
  });
  if (!written) return 'no Installation "default"';
  // A newer operator's finalizers and reports went in the step before (remove-operator-leftovers).
  const t = plan.transforms.installation;
  const removed = t.removeFields;
  const stopped = t.stopAllocations ? `${t.stopAllocations.field}: ${JSON.stringify(t.stopAllocations.value)} on ${t.stopAllocations.cidrs.join(', ')}` : '';
  const changes = [
    ...(removed.length ? [`without ${removed.join(', ')}`] : []),
    ...(t.trimPoolsPerFamily ? ['with one pool per family'] : []),
    ...(stopped ? [stopped] : []),
    ...(t.unlistPools?.cidrs.length ? [`without the entries of ${t.unlistPools.cidrs.join(', ')}`] : []),
  ];
  return changes.length ? `Installation rewritten: ${changes.join('; ')}` : 'Installation already valid for the target';
}

async function restoreData({ client, bundle, reporter }: StepDeps): Promise<string> {
  const r = await restoreResources(client, bundle, { existing: 'update', dropUnknownFields: true }, reporter);
  if (r.failures.length > 0) {
    throw new EnvironmentError(
      `restore left ${r.failures.length} object(s) not as in the bundle: ${r.failures
        .slice(0, 5)
        .map((f) => `${f.id}: ${f.reason}`)
        .join('; ')}`,
    );
  }
  for (const d of r.drifted) reporter.warn('CNR_APPLY_RESTORE_DRIFT', `${d.id} differs from the bundle after the restore at ${d.paths.join(', ')}`);
  return `restored from bundle ${bundle.manifest.id} (${r.actions.filter((a) => a.action !== 'unchanged' && a.action !== 'skip').length} objects written)`;
}

/** Put back, from the bundle, the kinds of the objects the plan found changed since the backup. */
async function restoreDrift({ client, bundle, plan, reporter }: StepDeps): Promise<string> {
  // Exactly the objects the plan showed as changed (the Installation is the plan's own transform): another object of
  // the same kind that changed after the plan was made, or was deleted since the backup, was not shown to the user.
  const drift = (plan.drift ?? []).filter((ref) => ref.split('/')[0] !== 'Installation');
  const kinds = [...new Set(drift.map((ref) => ref.split('/')[0]!))];
  if (!kinds.length) return 'nothing changed since the backup';
  const r = await restoreResources(client, bundle, { existing: 'update', dropUnknownFields: true, kinds, only: new Set(drift) }, reporter);
  if (r.failures.length > 0) {
    throw new EnvironmentError(
      `could not restore ${r.failures.length} object(s) changed since the backup: ${r.failures
        .slice(0, 5)
        .map((f) => `${f.id}: ${f.reason}`)
        .join('; ')}`,
    );
  }
  const written = r.actions.filter((a) => a.action !== 'unchanged' && a.action !== 'skip').length;
  return `${written} object(s) of kind ${kinds.join(', ')} put back as in bundle ${bundle.manifest.id}`;
}

async function verifyData({ client, bundle, plan }: StepDeps): Promise<string> {
  const found = await bundleDataPresent(client, bundle, plan.transforms.installation, plan.target.version, plan.current.version);
  // Objects that had already changed when the plan was made are the user's (kept unless --restore-drift).
  const kept = plan.steps.some((s) => s.id === 'restore-drift') ? new Set<string>() : new Set(plan.drift ?? []);
  const r = { checked: found.checked, differences: found.differences.filter((d) => !(d.problem === 'changed' && kept.has(d.object))) };
  if (r.differences.length > 0) {
    throw new EnvironmentError(
      `Calico data differs from the bundle after the change: ${r.differences
        .slice(0, 5)
        .map((d) => `${d.object} ${d.problem}${d.detail ? ` (${d.detail})` : ''}`)
        .join('; ')}${r.differences.length > 5 ? ` and ${r.differences.length - 5} more` : ''}`,
    );
  }
  return `${r.checked} Calico objects of the bundle present and unchanged (Installation: planned transform only${kept.size ? `; ${kept.size} changed before the plan, kept` : ''})`;
}
