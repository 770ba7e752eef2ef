/**
 * How default-tier policies are stored, before and from Calico 3.32. Releases before 3.32 store a default-tier
 * policy `<name>` as the crd.projectcalico.org object `default.<name>` (3.29-3.31: libcalico-go
 * names.TieredPolicyName, dotted names as they are; up to 3.28: clientv3 convertPolicyNameForStorage) and look it up
 * so; listing shows it by its v3 name (resources.go determinePolicyName, convertPolicyNameFromStorage). 3.32's kube-controllers renames every such object to `<name>`
 * (kube-controllers/pkg/controllers/networkpolicy/policy_name_migrator.go: create under the new name, then delete the
 * old; default tier only), and new ones are created so. After a downgrade below 3.32 such a policy is listed but
 * cannot be read, changed or deleted by name (seen with the real 3.31.7 calicoctl: "default.<name> not found").
 */
import { compareVersions } from './knowledge.js';
import type { KubeObject } from '../kube/types.js';

/** The crd.projectcalico.org plurals of the four kinds the migrator renames. */
export const POLICY_PLURALS = ['networkpolicies', 'globalnetworkpolicies', 'stagednetworkpolicies', 'stagedglobalnetworkpolicies'] as const;

/** The first release with tiers in Calico Open Source, whose names.TieredPolicyName leaves dotted names alone. */
const TIERED_NAMES_RELEASE = 'v3.29.0';

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
