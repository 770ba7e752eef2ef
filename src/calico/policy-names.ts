/**
 * How default-tier policies are stored, before and from Calico 3.32. Releases before 3.32 store a default-tier
 * policy `<name>` as the crd.projectcalico.org object `default.<name>` (3.29-3.31: libcalico-go
 * names.TieredPolicyName, dotted names as they are; up to 3.28: clientv3 convertPolicyNameForStorage) and look it up
 * so; listing shows it by its v3 name (resources.go determinePolicyName, convertPolicyNameFromStorage). 3.32's kube-controllers renames every such object to `<name>`
 * (kube-controllers/pkg/controllers/networkpolicy/policy_name_migrator.go: create under the new name, then delete the
 * old; default tier only), and new ones are created so. After a downgrade below 3.32 such a policy is listed but
 * cannot be read, changed or deleted by name (seen with the real 3.31.7 calicoctl: "default.<name> not found").
 */
import { CALICO_CRD_GROUP, compareVersions, imageTag, tagVersion, V3_METADATA_ANNOTATION } from './knowledge.js';
import { K } from '../kube/builtin.js';
import type { KubeClient } from '../kube/client.js';
import { groupOf, type KubeObject } from '../kube/types.js';

/** The crd.projectcalico.org plurals of the four kinds the migrator renames. */
export const POLICY_PLURALS = ['networkpolicies', 'globalnetworkpolicies', 'stagednetworkpolicies', 'stagedglobalnetworkpolicies'] as const;

/** Their kinds. */
export const POLICY_KINDS: ReadonlySet<string> = new Set(['NetworkPolicy', 'GlobalNetworkPolicy', 'StagedNetworkPolicy', 'StagedGlobalNetworkPolicy']);

/** The first release with tiers in Calico Open Source, whose names.TieredPolicyName leaves dotted names alone. */
export const TIERED_NAMES_RELEASE = 'v3.29.0';

/** The first release that stores default-tier policies under their v3 names. */
export const POLICY_NAMING_RELEASE = 'v3.32.0';

/** A policy's tier: its spec, else the `projectcalico.org/tier` label Calico 3.29+ puts on it (kept when an older CRD prunes `spec.tier`). */
export function policyTier(p: KubeObject): string {
  return (p.spec?.tier as string | undefined) || p.metadata.labels?.['projectcalico.org/tier'] || 'default';
}

/**
 * The name a release `target` before 3.32 stores default-tier policy `p` under, when it is not the one `p` has now
 * (3.32's naming); undefined when `target` reads it as it is. 3.29-3.31 prefix a name without a dot
 * (libcalico-go names.TieredPolicyName); 3.28 and before prefix every name but `knp.` and `ossg.` ones (clientv3
 * convertPolicyNameForStorage). Policies of other tiers keep their names.
 */
export function nameBefore332(p: KubeObject, target: string): string | undefined {
  const name = p.metadata.name ?? '';
  if (policyTier(p) !== 'default' || name.startsWith('default.')) return undefined;
  if (compareVersions(target, TIERED_NAMES_RELEASE) >= 0) return name.includes('.') ? undefined : `default.${name}`;
  return /^(knp|ossg)\./.test(name) ? undefined : `default.${name}`;
}

/** True when a change from `from` to `to` leaves 3.32's naming for a release that cannot read it. */
export function leavesPolicyNaming(from: string | undefined, to: string): boolean {
  return !!from && compareVersions(from, POLICY_NAMING_RELEASE) >= 0 && compareVersions(to, POLICY_NAMING_RELEASE) < 0;
}

/**
 * The name 3.32+ stores default-tier policy `p` under, when it is not the one `p` has: its v3 name, which
 * libcalico-go reads from the `projectcalico.org/metadata` annotation, else the stored name without `default.`
 * (resources.go determinePolicyName); the migrator renames every default-tier object whose stored name differs.
 */
export function nameFrom332(p: KubeObject): string | undefined {
  const name = p.metadata.name ?? '';
  if (policyTier(p) !== 'default') return undefined;
  let v3: unknown;
  try {
    v3 = JSON.parse(p.metadata.annotations?.[V3_METADATA_ANNOTATION] ?? '{}')?.name;
  } catch {
    v3 = undefined;
  }
  const want = typeof v3 === 'string' && v3 ? v3 : name.replace(/^default\./, '');
  return want !== name ? want : undefined;
}

/**
 * An object's name as one key for every release: a default-tier crd.projectcalico.org policy's name as 3.32 stores
 * it (its v3 name, nameFrom332), whichever release stored it; any other object's name. A bundle's `default.deny` and
 * the cluster's `deny` after 3.32's migrator renamed it are one policy.
 */
export function v3PolicyName(o: KubeObject): string | undefined {
  const name = o.metadata.name;
  if (!name || !POLICY_KINDS.has(o.kind) || groupOf(o.apiVersion) !== CALICO_CRD_GROUP) return name;
  return nameFrom332(o) ?? name;
}

/**
 * The name release `live` must find policy `p` under, when it is not `p`'s own: `p` as release `written` stored it
 * (a bundle's). 3.32+ would rename a default-tier `default.<name>` itself, keeping a `<name>` that exists and
 * deleting the other: written so, a restored policy would be lost to the live one. Below 3.32 a policy 3.32 stored
 * cannot be read by name. Undefined for other objects, or when either release is unknown.
 */
export function policyNameFor(p: KubeObject, written: string | undefined, live: string | undefined): string | undefined {
  if (!live || !POLICY_KINDS.has(p.kind) || groupOf(p.apiVersion) !== CALICO_CRD_GROUP) return undefined;
  if (compareVersions(live, POLICY_NAMING_RELEASE) >= 0) return nameFrom332(p);
  return leavesPolicyNaming(written, live) ? nameBefore332(p, live) : undefined;
}

/** Where calico-kube-controllers runs: the operator's namespace, then calico.yaml's. */
const KUBE_CONTROLLERS = 'calico-kube-controllers';
const KUBE_CONTROLLERS_NAMESPACES = ['calico-system', 'kube-system'];

/** The Calico release of each calico-kube-controllers Deployment's images (the policy name migrator runs there). */
export async function kubeControllersReleases(client: KubeClient): Promise<{ namespace: string; image: string; version: string }[]> {
  const found: { namespace: string; image: string; version: string }[] = [];
  for (const namespace of KUBE_CONTROLLERS_NAMESPACES) {
    const d = await client.getOrUndefined<KubeObject>(K.deployment, namespace, KUBE_CONTROLLERS);
    for (const c of (d?.spec?.template?.spec?.containers ?? []) as { image?: string }[]) {
      const version = tagVersion(imageTag(c.image))?.version;
      if (c.image && version) found.push({ namespace, image: c.image, version });
    }
  }
  return found;
}
