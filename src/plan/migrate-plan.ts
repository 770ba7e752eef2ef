/**
 * `plan --migrate-datastore`: the move of a calico-etcd.yaml install to the Kubernetes datastore, the same release,
 * the way Calico documents it (calicoctl datastore migrate lock, export, import; calico.yaml; unlock), with a
 * verified bundle of etcd first, a copy verified against etcd before anything gives out addresses again, and a
 * rollback that puts calico-etcd.yaml back and unlocks etcd (apply --rollback) for as long as the Kubernetes
 * datastore is still locked. What cannot be done is refused by name (exit 5) before a plan exists.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { checkCalicoctlVersion, resolveCalicoctl } from '../calico/calicoctl.js';
import type { EtcdAccessFlags } from '../calico/etcd-connection.js';
import { readCalico } from '../calico/detect.js';
import { refuseEnterprise } from '../calico/enterprise.js';
import { refuseManagedUpgrade } from '../calico/managed-addon.js';
import { loadRelease, type Release } from '../calico/release.js';
import { refuseUnsupportedCalico } from '../calico/supported.js';
import { parseDuration } from '../config/config.js';
import { BadInputError, RefusedError } from '../core/errors.js';
import type { Reporter } from '../io/host.js';
import { K } from '../kube/builtin.js';
import type { KubeClient } from '../kube/client.js';
import { crdResourceType } from '../kube/discovery.js';
import type { KubeObject } from '../kube/types.js';
import { findManifestEdits, MANIFEST_NS } from './manifest-custom.js';
import { judgeEtcdNodes, refuseNodesWithoutK8sRef } from './migrate-nodes.js';
import { openEtcdPlanBundle } from './etcd-bundle.js';
import { manifestSha256 } from './preflight.js';
import { MIGRATE_STEP_IDS, MIGRATE_STEP_TEXT, STEP_TEXT } from './steps.js';
import { liveManifestTypha } from './typha.js';
import { planHeader, type ManifestTransform, type Plan, type PlanFinding } from './types.js';

export interface MigratePlanOptions {
  bundle?: string;
  manifests?: string;
  maxBackupAge?: string;
  diskSnapshots?: boolean;
  /** The calicoctl to check now (`--calicoctl`, else PATH); apply resolves its own again. */
  calicoctl?: string;
  /** `--etcd-*`: Calico's etcd when calico-config and Secret calico-etcd-secrets do not name it all. */
  etcd?: EtcdAccessFlags;
  now?: Date;
}

/** calico-config keys and calico-node env that point Calico at etcd: never carried into calico.yaml. */
const isEtcdSetting = (name: string) => /^etcd_/.test(name) || /^ETCD_/.test(name) || name === 'DATASTORE_TYPE';

/** The edits calico.yaml takes: all of calico-etcd.yaml's but its etcd settings. */
export function forwardEdits(rollback: ManifestTransform): ManifestTransform {
  return {
    ...rollback,
    calicoNodeEnv: {
      set: rollback.calicoNodeEnv.set.filter((e) => !isEtcdSetting(e.name)),
      remove: rollback.calicoNodeEnv.remove.filter((n) => !isEtcdSetting(n)),
    },
    calicoConfig: Object.fromEntries(Object.entries(rollback.calicoConfig).filter(([k]) => !isEtcdSetting(k))),
    // A container field edit of a workload calico.yaml does not have is dropped by applyManifestEdits itself.
  };
}

/** The install's edits of calico-etcd.yaml, each said to be carried into calico.yaml or kept for a rollback only. */
function migrationEditsFinding(f: PlanFinding): PlanFinding {
  const etcd = (d: string) => /^(calico-config etcd_\w+=|calico-node env (ETCD_\w+|DATASTORE_TYPE)[= ])/.test(d);
  const carried = f.details.filter((d) => !etcd(d)).length;
  return {
    ...f,
    severity: carried ? 'warning' : 'info',
    details: f.details.map((d) => (etcd(d) ? `${d}: an etcd setting, written back only by a rollback` : `${d}: carried into calico.yaml`)),
    plan: "carried into calico.yaml, except the etcd settings (a rollback writes them all back into calico-etcd.yaml); any other edit (resources, tolerations, volumes) is replaced by the release's",
  };
}

/** Calico CRDs of the Kubernetes datastore that hold objects: calicoctl's import refuses them, and so does the plan. */
async function calicoDataInKubernetes(client: KubeClient): Promise<string[]> {
  const crds = (await client.listAll(K.crd)).filter((c) => c.spec?.group === 'crd.projectcalico.org');
  const holding: string[] = [];
  for (const crd of crds) {
    // kube-controllers' copies of Kubernetes NetworkPolicies are not Calico data (calicoctl's import skips them too).
    const objs = (await client.listAll(crdResourceType(crd))).filter((o) => !o.metadata.name.startsWith('knp.default.'));
    if (objs.length) holding.push(`${crd.metadata.name} (${objs.length})`);
  }
  return holding;
}

async function liveManifestWorkloads(client: KubeClient, release: KubeObject[]): Promise<KubeObject[]> {
  const out: KubeObject[] = [];
  for (const o of release) {
    if (o.kind !== 'DaemonSet' && o.kind !== 'Deployment') continue;
    const w = await client.getOrUndefined(o.kind === 'DaemonSet' ? K.daemonSet : K.deployment, MANIFEST_NS, o.metadata.name);
    if (w) out.push({ ...w, kind: o.kind });
  }
  return out;
}

export async function buildMigratePlan(client: KubeClient, opts: MigratePlanOptions, reporter: Reporter): Promise<Plan> {
  const maxBackupAge = opts.maxBackupAge ?? '24h';
  const maxAgeMs = parseDuration(maxBackupAge, '--max-backup-age');
  const { install, objects } = await readCalico(client);
  refuseUnsupportedCalico(install, 'plan', 'no plan was made', { etcdHandled: true });
  if (install.installType === 'none') throw new BadInputError('no Calico install found in this cluster: there is nothing to migrate');
  if (install.method.datastore.type !== 'etcd')
    throw new BadInputError('Calico here keeps its data in the Kubernetes datastore already: plan --migrate-datastore moves an etcd-datastore install');
  refuseEnterprise(install.method.variant, 'no plan was made');
  refuseManagedUpgrade(install.method, install.version ?? 'the Kubernetes datastore');
  if (install.method.method !== 'manifest')
    throw new RefusedError(`plan --migrate-datastore moves a calico-etcd.yaml install; this one is ${install.method.method}: no plan was made`, {
      hint: "follow Calico's procedure for it: calicoctl datastore migrate lock, export, import, the Kubernetes-datastore manifests, unlock",
    });
  if (await liveManifestTypha(client))
    throw new RefusedError('this install runs Typha (calico-typha.yaml): plan --migrate-datastore moves calico-etcd.yaml installs only; no plan was made');
  if (!install.version)
    throw new RefusedError('the Calico version of this install is unknown (calico-node image): calicoctl of the same release is needed; no plan was made');
  const release: Release = await loadRelease(install.version, { manifests: opts.manifests, need: 'etcd' });
  if (!release.calicoManifest) throw new BadInputError(`the ${release.version} manifests have no calico.yaml`);
  reporter.info('CNR_PLAN_CURRENT', `current: Calico ${release.version} on the etcd datastore (${install.method.datastore.evidence ?? 'etcd'})`);

  const holding = await calicoDataInKubernetes(client);
  if (holding.length) {
    throw new RefusedError(`the Kubernetes datastore already holds Calico data (${holding.join(', ')}): calicoctl's import would refuse it; no plan was made`, {
      hint: 'if it is the copy of an earlier migration that was rolled back, delete the crd.projectcalico.org CRDs (kubectl delete crd <name>...), then plan again',
    });
  }
  // calicoctl's export stops on a Node without a k8s reference, after the lock: refused now (and again before the lock).
  const nodes = await judgeEtcdNodes(client, opts.etcd);
  refuseNodesWithoutK8sRef(nodes, 'no plan was made');
  // calicoctl of the cluster's release, checked now so that apply does not stop on it half-way (apply checks again).
  const calicoctl = resolveCalicoctl(opts.calicoctl, 'no plan was made');
  await checkCalicoctlVersion(calicoctl, release.version);

  const { bundle, bundlePath, uid, reconcilers, preflight } = await openEtcdPlanBundle(
    client,
    { objects, method: install.method },
    { ...opts, maxAgeMs, maxBackupAge },
    'a migration',
  );
  try {
    const workloads = await liveManifestWorkloads(client, release.calicoEtcdManifest!);
    const config = await client.getOrUndefined(K.configMap, MANIFEST_NS, 'calico-config');
    const found = findManifestEdits(
      { ds: workloads.find((w) => w.kind === 'DaemonSet' && w.metadata.name === 'calico-node'), config, workloads },
      { version: release.version, objects: release.calicoEtcdManifest!, file: 'calico-etcd.yaml' },
    );
    const forward = forwardEdits(found.transform);
    const findings: PlanFinding[] = found.finding ? [migrationEditsFinding(found.finding)] : [];
    if (nodes.toMissingK8sNodes.length)
      findings.push({
        id: 'migrate-nodes-not-in-kubernetes',
        severity: 'warning',
        title: `${nodes.toMissingK8sNodes.length} Calico Node(s) in etcd refer to Kubernetes nodes that do not exist`,
        objects: nodes.toMissingK8sNodes.map((n) => `Node/${n.split(' -> ')[0]}`),
        details: nodes.toMissingK8sNodes,
        action: 'keep',
        plan: "calicoctl's import skips them (the Kubernetes datastore's Nodes are the Kubernetes nodes); the IPAM they hold is compared with the copy by verify-migrated, as all of etcd's is, while both datastores are locked",
      });
    const now = opts.now ?? new Date();
    return {
      ...planHeader(now, randomBytes(2).toString('hex')),
      cluster: { uid, name: client.connection.clusterName, server: client.connection.server },
      current: { installType: install.installType, version: release.version },
      target: {
        version: release.version,
        manifests: /^https?:/.test(release.origin) ? release.origin : path.resolve(release.origin),
        files: Object.fromEntries(Object.entries(release.files).map(([k, f]) => [k, { sha256: f.sha256 }])),
      },
      direction: 'same',
      strategy: 'migrate-datastore',
      options: { rebootNodes: false, diskSnapshots: opts.diskSnapshots !== false, maxBackupAge, flags: [] },
      bundle: { path: path.resolve(bundlePath), id: bundle.manifest.id, manifestSha256: manifestSha256(bundle), createdAt: bundle.manifest.createdAt },
      preflight,
      findings,
      transforms: { installation: { removeFields: [], trimPoolsPerFamily: false }, manifest: forward },
      migrate: { from: 'etcd', to: 'kubernetes', rollback: found.transform },
      ...(reconcilers.length ? { reconcilers } : {}),
      steps: MIGRATE_STEP_IDS.map((id) => ({ id, title: STEP_TEXT[id].title, description: MIGRATE_STEP_TEXT[id]?.description ?? STEP_TEXT[id].description })),
    };
  } finally {
    await bundle.close();
  }
}
