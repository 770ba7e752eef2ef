/**
 * Calico 3.32 stores default-tier policies under their v3 names: its kube-controllers renames every older
 * `default.<name>` crd.projectcalico.org object to `<name>` (kube-controllers/pkg/controllers/networkpolicy/
 * policy_name_migrator.go, on by default), and new ones are created so. Releases before 3.32 look a default-tier
 * policy up as `default.<name>` (libcalico-go names.BackendTieredPolicyName), while listing shows it by its v3 name
 * (resources.go determinePolicyName): after a downgrade such a policy is listed but cannot be read, changed or
 * deleted by name (seen with the real 3.31.7 calicoctl after 3.32.1 -> 3.31.7: "resource does not exist ...
 * default.<name> not found"). The plan names them; renaming them back is not built yet.
 */
import { compareVersions, CALICO_CRD_GROUP } from '../calico/knowledge.js';
import type { Release } from '../calico/release.js';
import type { KubeObject } from '../kube/types.js';
import type { LiveCalico } from './live.js';
import type { PlanFinding } from './types.js';

const POLICY_PLURALS = ['networkpolicies', 'globalnetworkpolicies', 'stagednetworkpolicies', 'stagedglobalnetworkpolicies'];

/** Default-tier policies stored under a name without the `default.` prefix (3.32's naming). */
export function policiesNamedBy332(live: LiveCalico): KubeObject[] {
  return POLICY_PLURALS.flatMap((plural) => live.objects.get(`${plural}.${CALICO_CRD_GROUP}`) ?? []).filter(
    (p) => ((p.spec?.tier as string | undefined) ?? 'default') === 'default' && !(p.metadata.name ?? '').startsWith('default.'),
  );
}

/** The finding for a downgrade from 3.32+ to a release before it, when such policies exist. */
export function policyNamesFinding(live: LiveCalico, target: Release, current: { version?: string }): PlanFinding | undefined {
  if (!current.version || compareVersions(current.version, '3.32.0') < 0 || compareVersions(target.version, '3.32.0') >= 0) return undefined;
  const policies = policiesNamedBy332(live);
  if (!policies.length) return undefined;
  const ref = (p: KubeObject) => `${p.kind}/${p.metadata.namespace ? `${p.metadata.namespace}/` : ''}${p.metadata.name}`;
  return {
    id: 'policies-named-by-3.32',
    severity: 'warning',
    title: `default-tier policies stored under 3.32's names: ${target.version} lists them but cannot read, change or delete them by name`,
    objects: policies.map(ref),
    details: policies.map((p) => `${ref(p)}: ${target.version} looks it up as default.${p.metadata.name}`),
    action: 'none',
    plan: `not changed by this plan (renaming them back is not built yet); after the downgrade re-create each as default.<name> with the same spec and delete the old one, or upgrade to 3.32 again to manage them`,
  };
}
