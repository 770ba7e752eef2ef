/**
 * How default-tier policies are stored, before and from Calico 3.32. Releases before 3.32 store a default-tier
 * policy `<name>` as the crd.projectcalico.org object `default.<name>` (libcalico-go names.TieredPolicyName) and look
 * it up so; listing shows it by its v3 name, kept in the `projectcalico.org/metadata` annotation (resources.go
 * determinePolicyName). 3.32's kube-controllers renames every such object to `<name>`
 * (kube-controllers/pkg/controllers/networkpolicy/policy_name_migrator.go: create under the new name, then delete the
 * old; default tier only), and new ones are created so. After a downgrade below 3.32 such a policy is listed but
 * cannot be read, changed or deleted by name (seen with the real 3.31.7 calicoctl: "default.<name> not found").
 */
import { compareVersions } from './knowledge.js';
import type { KubeObject } from '../kube/types.js';

/** The crd.projectcalico.org plurals of the four kinds the migrator renames. */
export const POLICY_PLURALS = ['networkpolicies', 'globalnetworkpolicies', 'stagednetworkpolicies', 'stagedglobalnetworkpolicies'] as const;

/** The first release that stores default-tier policies under their v3 names. */
export const POLICY_NAMING_RELEASE = 'v3.32.0';

/** True for a default-tier policy stored under a name without the `default.` prefix (3.32's naming). */
export function storedUnderV3Name(p: KubeObject): boolean {
  return ((p.spec?.tier as string | undefined) || 'default') === 'default' && !(p.metadata.name ?? '').startsWith('default.');
}

/** The name a release before 3.32 stores and looks up a default-tier policy under. */
export function namedBefore332(p: KubeObject): string {
  return `default.${p.metadata.name}`;
}

/** True when a change from `from` to `to` leaves 3.32's naming for a release that cannot read it. */
export function leavesPolicyNaming(from: string | undefined, to: string): boolean {
  return !!from && compareVersions(from, POLICY_NAMING_RELEASE) >= 0 && compareVersions(to, POLICY_NAMING_RELEASE) < 0;
}
