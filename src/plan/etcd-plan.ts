/**
 * `plan --to` for a calico-etcd.yaml install: the upgrade or downgrade Calico documents for it (apply the target
 * release's calico-etcd.yaml with the same edits), with the data staying in etcd. The plan finds every edit of the
 * current calico-etcd.yaml (etcd endpoints and certificate paths included: the release's placeholders would cut every
 * program off etcd) and proves, before a plan exists, that the target objects point at the same etcd as the live
 * ones. The data is verified in etcd afterwards (apply/etcd-steps.ts). What is not built is refused by name (exit 5).
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import type { CalicoObjects } from '../calico/calico-objects.js';
import type { EtcdAccessFlags } from '../calico/etcd-connection.js';
import type { CalicoInstall } from '../calico/detect.js';
import { compareVersions } from '../calico/knowledge.js';
import { POLICY_NAMING_RELEASE } from '../calico/policy-names.js';
import { loadRelease, type Release } from '../calico/release.js';
import { parseDuration } from '../config/config.js';
import { BadInputError, RefusedError } from '../core/errors.js';
import type { Reporter } from '../io/host.js';
import { K } from '../kube/builtin.js';
import type { KubeClient } from '../kube/client.js';
import type { KubeObject } from '../kube/types.js';
import { etcdDifferences, etcdFieldsTheTargetLacks } from './etcd-compare.js';
import { reconcilerFindings } from './gitops-findings.js';
import { applyManifestEdits, MANIFEST_NS, planManifestEdits } from './manifest-custom.js';
import { openEtcdPlanBundle } from './etcd-bundle.js';
import { manifestSha256 } from './preflight.js';
import { ETCD_STEP_IDS, ETCD_STEP_TEXT, STEP_TEXT } from './steps.js';
import { liveManifestTypha } from './typha.js';
import { planHeader, type ManifestTransform, type Plan, type PlanFinding } from './types.js';

export interface EtcdPlanOptions {
  to: string;
  bundle?: string;
  manifests?: string;
  maxBackupAge?: string;
  diskSnapshots?: boolean;
  rebootNodes?: boolean;
  flags?: string[];
  /** `--etcd-*`: Calico's etcd when calico-config and Secret calico-etcd-secrets do not name it all. */
  etcd?: EtcdAccessFlags;
  now?: Date;
}

/** calico-config keys and calico-node env that point Calico at etcd. */
const isEtcdSetting = (name: string) => /^etcd_/.test(name) || /^ETCD_/.test(name) || name === 'DATASTORE_TYPE';

const nodeEnv = (objs: (KubeObject | undefined)[]): Record<string, string> => {
  const ds = objs.find((o) => o?.kind === 'DaemonSet' && o.metadata.name === 'calico-node');
  const c = (ds?.spec?.template?.spec?.containers ?? []).find((x: { name: string }) => x.name === 'calico-node');
  return Object.fromEntries(
    ((c?.env ?? []) as { name: string; value?: string; valueFrom?: unknown }[]).map((e) => [e.name, JSON.stringify(e.value ?? e.valueFrom)]),
  );
};

/**
 * Where the target objects (with the planned edits) point Calico at etcd, compared with the live objects: every etcd
 * setting of calico-config and of calico-node's env must be the same, or the rollout would cut the programs off their
 * data. Returns what differs; empty when they agree.
 */
export function etcdSettingsDiffer(live: { config?: KubeObject; ds?: KubeObject }, target: KubeObject[]): string[] {
  const out: string[] = [];
  const liveData: Record<string, string> = live.config?.data ?? {};
  const targetData: Record<string, string> = target.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'calico-config')?.data ?? {};
  for (const k of new Set([...Object.keys(liveData), ...Object.keys(targetData)].filter(isEtcdSetting)))
    if ((liveData[k] ?? '') !== (targetData[k] ?? ''))
      out.push(`calico-config ${k}: live ${JSON.stringify(liveData[k] ?? '')}, target ${JSON.stringify(targetData[k] ?? '')}`);
  const le = nodeEnv([live.ds]);
  const te = nodeEnv(target);
  for (const k of new Set([...Object.keys(le), ...Object.keys(te)].filter(isEtcdSetting)))
    if (le[k] !== te[k]) out.push(`calico-node env ${k}: live ${le[k] ?? 'not set'}, target ${te[k] ?? 'not set'}`);
  return out;
}

/** The objects apply-calico-manifest writes for an etcd install: the target's calico-etcd.yaml but its Secret, with the edits. */
export function etcdTargetObjects(target: Release, edits: ManifestTransform | undefined): KubeObject[] {
  if (!target.calicoEtcdManifest) throw new BadInputError(`the ${target.version} manifests have no calico-etcd.yaml`);
  // The Secret holds the user's etcd certificates; the release's is empty.
  return applyManifestEdits(
    target.calicoEtcdManifest.filter((o) => o.kind !== 'Secret' && o.kind !== 'CustomResourceDefinition'),
    edits,
  );
}

/** A plan for an install on the etcd datastore: refusals first (nothing read that they do not need), then the plan. */
export async function buildEtcdPlan(
  client: KubeClient,
  install: CalicoInstall,
  objects: CalicoObjects,
  opts: EtcdPlanOptions,
  reporter: Reporter,
): Promise<Plan> {
  const maxBackupAge = opts.maxBackupAge ?? '24h';
  const maxAgeMs = parseDuration(maxBackupAge, '--max-backup-age');
  const evidence = install.method.datastore.evidence ?? 'etcd';
  if (install.method.method !== 'manifest')
    throw new RefusedError(
      `Calico here keeps its data in etcd (${evidence}) and is installed as ${install.method.method}: plan upgrades calico-etcd.yaml installs only; no plan was made`,
      {
        hint: 'upgrade it by the procedure of its install method, after cni-rewind backup (it reads etcd)',
      },
    );
  if (opts.rebootNodes || opts.flags?.length)
    throw new RefusedError(
      `${opts.rebootNodes ? '--reboot-nodes' : opts.flags!.map((f) => `--${f}`).join(', ')} is not offered for an install on the etcd datastore: no plan was made`,
    );
  if (await liveManifestTypha(client))
    throw new RefusedError('this etcd install runs Typha (calico-typha.yaml is a Kubernetes-datastore manifest): no plan was made');
  if (!install.version)
    throw new RefusedError(
      'the Calico version of this etcd install is unknown (calico-node image): its calico-etcd.yaml edits cannot be found; no plan was made',
      {
        hint: 'pin calico-node to a release tag, or upgrade by hand with the edits of your calico-etcd.yaml',
      },
    );
  const target: Release = await loadRelease(opts.to, { manifests: opts.manifests, need: 'etcd' });
  const direction =
    compareVersions(target.version, install.version) < 0 ? 'downgrade' : compareVersions(target.version, install.version) > 0 ? 'upgrade' : 'same';
  if (direction === 'same') throw new BadInputError(`the cluster already runs Calico ${target.version}`);
  // 3.32's kube-controllers renames default-tier policies in etcd too (its policy name migrator): the plan's check of
  // the data in etcd does not follow the renaming, and a release below 3.32 would not find the renamed ones.
  const crosses = compareVersions(install.version, POLICY_NAMING_RELEASE) >= 0 !== compareVersions(target.version, POLICY_NAMING_RELEASE) >= 0;
  if (crosses)
    throw new RefusedError(
      `${install.version} -> ${target.version} on the etcd datastore crosses ${POLICY_NAMING_RELEASE}, whose kube-controllers renames default-tier policies in etcd: not offered; no plan was made`,
      {
        hint: `an etcd install is planned between releases on the same side of ${POLICY_NAMING_RELEASE}; plan --migrate-datastore moves it to the Kubernetes datastore, where changes across ${POLICY_NAMING_RELEASE} are planned`,
      },
    );
  reporter.info('CNR_PLAN_CURRENT', `current: Calico ${install.version} on the etcd datastore (${evidence})`);
  reporter.info('CNR_PLAN_TARGET', `target: Calico ${target.version} from ${target.origin}`);

  const edits = await planManifestEdits(client, install.version, opts.manifests, { etcd: true });
  if (!edits.transform)
    throw new RefusedError(`the ${install.version} calico-etcd.yaml cannot be read, so its etcd settings and edits cannot be carried over: no plan was made`, {
      hint: `pass --manifests with a folder that holds ${install.version}'s calico-etcd.yaml (and the target's)`,
    });
  const live = {
    config: await client.getOrUndefined(K.configMap, MANIFEST_NS, 'calico-config'),
    ds: await client.getOrUndefined(K.daemonSet, MANIFEST_NS, 'calico-node'),
  };
  const differ = etcdSettingsDiffer(live, etcdTargetObjects(target, edits.transform));
  if (differ.length)
    throw new RefusedError(`the target calico-etcd.yaml would point Calico at another etcd than it uses now (${differ.join('; ')}): no plan was made`);

  const { bundle, bundlePath, uid, reconcilers, preflight } = await openEtcdPlanBundle(
    client,
    { objects, method: install.method },
    { ...opts, maxAgeMs, maxBackupAge },
    'a plan for an etcd install',
  );
  try {
    // What differs from the bundle now: the user's changes since the backup, kept, and not held against the change.
    const drift = await etcdDifferences(client, bundle, reporter, opts.etcd);
    const lacking = await etcdFieldsTheTargetLacks(bundle, target);
    const findings: PlanFinding[] = [...(edits.finding ? [edits.finding] : []), ...(lacking ? [lacking] : []), ...reconcilerFindings(reconcilers)];
    if (drift.length)
      findings.push({
        id: 'changed-since-backup',
        severity: 'warning',
        title: `${drift.length} Calico record(s) in etcd differ from the backup ${bundle.manifest.id}`,
        objects: drift.map((d) => d.id),
        details: drift.map((d) => `${d.id}: ${d.reason}`),
        action: 'keep',
        plan: 'kept as they are now; the final verification skips them (restore them from the bundle with cni-rewind restore BUNDLE --resources)',
      });
    const now = opts.now ?? new Date();
    return {
      ...planHeader(now, randomBytes(2).toString('hex')),
      cluster: { uid, name: client.connection.clusterName, server: client.connection.server },
      current: { installType: install.installType, version: install.version },
      target: {
        version: target.version,
        manifests: /^https?:/.test(target.origin) ? target.origin : path.resolve(target.origin),
        files: Object.fromEntries(Object.entries(target.files).map(([k, f]) => [k, { sha256: f.sha256 }])),
      },
      direction,
      strategy: 'in-place',
      datastore: 'etcd',
      options: { rebootNodes: false, diskSnapshots: opts.diskSnapshots !== false, maxBackupAge, flags: [] },
      bundle: { path: path.resolve(bundlePath), id: bundle.manifest.id, manifestSha256: manifestSha256(bundle), createdAt: bundle.manifest.createdAt },
      preflight,
      findings,
      transforms: { installation: { removeFields: [], trimPoolsPerFamily: false }, manifest: edits.transform },
      drift: drift.map((d) => d.id),
      ...(reconcilers.length ? { reconcilers } : {}),
      steps: etcdSteps(),
    };
  } finally {
    await bundle.close();
  }
}

/** The steps of an etcd install's plan, as the catalogue and ETCD_STEP_TEXT say them (apply derives the same). */
export function etcdSteps(): Plan['steps'] {
  return ETCD_STEP_IDS.map((id) => ({ id, ...STEP_TEXT[id], ...ETCD_STEP_TEXT[id] }));
}
