/**
 * What restore may write, whatever a bundle's files say: the Calico kinds (the Calico CRD groups, and Calico's
 * AdminNetworkPolicy/BaselineAdminNetworkPolicy) and the config objects export takes (EXPORT_CONFIG), each read
 * from the path the writer would have given it. A crafted bundle's ClusterRoleBinding, its Secret in
 * kube-system, its Deployment or an object filed under another namespace are refused by name, never created.
 * Helm's records of a release (older exports took them with the tigera-operator namespace's Secrets) are Helm's:
 * never written, whatever the bundle says.
 */
import { helmRecordMarks } from '../calico/helm-release.js';
import { CALICO_GROUPS, EXPORT_CONFIG, SHARED_POLICY_GROUP, SHARED_POLICY_KINDS } from '../calico/knowledge.js';
import type { BundleObject } from '../bundle/types.js';
import { groupOf, type KubeObject } from '../kube/types.js';
import { RESTORED_CONFIG_KINDS } from './order.js';

const includes = (list: readonly string[], v: string | undefined) => v !== undefined && list.includes(v);

/** Is this a Calico kind restore may write (from `resources/`)? */
export function isCalicoKind(obj: Pick<KubeObject, 'apiVersion' | 'kind'>): boolean {
  const g = groupOf(obj.apiVersion);
  return includes(CALICO_GROUPS, g) || (g === SHARED_POLICY_GROUP && includes(SHARED_POLICY_KINDS, obj.kind));
}

/** Is this one of the config objects export takes (from `config/`) and restore writes? */
export function isRestorableConfig(obj: KubeObject): boolean {
  if (groupOf(obj.apiVersion) !== '' || !RESTORED_CONFIG_KINDS.has(obj.kind)) return false;
  if (obj.kind === 'Secret' && includes(EXPORT_CONFIG.skipSecretTypes, obj.type)) return false;
  if (includes(EXPORT_CONFIG.namespaces, obj.metadata.namespace))
    return !(obj.kind === 'ConfigMap' && includes(EXPORT_CONFIG.skipConfigMaps, obj.metadata.name));
  return EXPORT_CONFIG.objects.some((o) => o.kind === obj.kind && o.namespace === obj.metadata.namespace && o.name === obj.metadata.name);
}

/**
 * A Helm release record (helm-release.ts helmRecordMarks: Helm's name for it and its type or owner label) filed where
 * export took config: Helm's history of the release, left to Helm. Written back, an old revision would be `deployed`
 * again beside the current one: Helm's Storage.Deployed (helm v4.3.2 pkg/storage/storage.go) then takes the newest
 * ("If executed concurrently, Helm's database gets corrupted and multiple releases are DEPLOYED. Take the latest"),
 * `helm history` lists both as deployed, upgrade supersedes only the newest, rollback and uninstall supersede every
 * one DeployedAll returns; into a cluster where the release was uninstalled since, it would bring back a release
 * Helm no longer has. Going back a revision is `helm rollback`'s work.
 */
export function isLeftToHelm(bo: BundleObject): boolean {
  const o = bo.object;
  return !bo.problem && groupOf(o.apiVersion) === '' && includes(EXPORT_CONFIG.namespaces, o.metadata.namespace) && helmRecordMarks(o) === 'record';
}

/**
 * The operator Deployment and calico-node DaemonSet export keeps for reference, and Helm's release records
 * (isLeftToHelm): restore leaves them alone.
 */
export function isReferenceOnlyConfig(bo: BundleObject): boolean {
  const o = bo.object;
  if (isLeftToHelm(bo)) return true;
  return (
    !bo.problem &&
    !RESTORED_CONFIG_KINDS.has(o.kind) &&
    EXPORT_CONFIG.objects.some((x) => x.kind === o.kind && x.namespace === o.metadata.namespace && x.name === o.metadata.name)
  );
}

/** Why restore refuses an object read from the bundle, or undefined when it may be written. */
export function admissionRefusal(bo: BundleObject, from: 'resources' | 'config'): string | undefined {
  if (bo.problem) return `not restored: ${bo.problem}`;
  const o = bo.object;
  if (from === 'resources' && !isCalicoKind(o)) return `not restored: ${o.apiVersion} ${o.kind} is not a Calico kind`;
  const where = `${o.kind} ${o.metadata.namespace ?? '(cluster)'}/${o.metadata.name}`;
  if (from === 'config' && !isRestorableConfig(o)) return `not restored: ${where} is not Calico configuration that export takes`;
  // Helm would read it as a release (by the name, or by the label) though no Helm wrote it as one.
  if (from === 'config' && helmRecordMarks(o) === 'partial')
    return `not restored: ${where} carries part of the marks of a Helm release record (the name sh.helm.release.v1.*, the type helm.sh/release.v1, the label owner=helm); restore writes nothing Helm would read as a release`;
  return undefined;
}

/** CRDs restore may create: those of the Calico groups (and Calico's shared policy kinds). */
export function isCalicoCrd(crd: KubeObject): boolean {
  const g = crd.spec?.group;
  return typeof g === 'string' && (includes(CALICO_GROUPS, g) || (g === SHARED_POLICY_GROUP && includes(SHARED_POLICY_KINDS, crd.spec?.names?.kind)));
}
