/**
 * The plan's word on 3.32's policy names (calico/policy-names.ts): a downgrade from 3.32+ below it names the
 * default-tier policies stored under their v3 names, which the target could list but not read, change or delete by
 * name, and which the step rename-policies-back gives their old names again after the rollout.
 */
import { CALICO_CRD_GROUP } from '../calico/knowledge.js';
import { leavesPolicyNaming, nameBefore332, POLICY_PLURALS } from '../calico/policy-names.js';
import type { Release } from '../calico/release.js';
import type { KubeObject } from '../kube/types.js';
import type { LiveCalico } from './live.js';
import type { PlanFinding } from './types.js';

/** Default-tier policies stored under a name release `target` (before 3.32) does not look them up by (3.32's naming). */
export function policiesNamedBy332(live: LiveCalico, target: string): KubeObject[] {
  return POLICY_PLURALS.flatMap((plural) => live.objects.get(`${plural}.${CALICO_CRD_GROUP}`) ?? []).filter((p) => nameBefore332(p, target));
}

/** The finding for a downgrade from 3.32+ to a release before it, when such policies exist. */
export function policyNamesFinding(live: LiveCalico, target: Release, current: { version?: string }): PlanFinding | undefined {
  if (!leavesPolicyNaming(current.version, target.version)) return undefined;
  const policies = policiesNamedBy332(live, target.version);
  if (!policies.length) return undefined;
  const ref = (p: KubeObject) => `${p.kind}/${p.metadata.namespace ? `${p.metadata.namespace}/` : ''}${p.metadata.name}`;
  return {
    id: 'policies-named-by-3.32',
    severity: 'warning',
    title: `default-tier policies stored under 3.32's names: ${target.version} would list them but could not read, change or delete them by name`,
    objects: policies.map(ref),
    details: policies.map((p) => `${ref(p)}: ${target.version} looks it up as ${nameBefore332(p, target.version)}`),
    action: 'transform',
    plan: `renamed back to default.<name> (same labels, annotations and spec) by the step "rename-policies-back" once ${target.version}'s kube-controllers runs instead of 3.32's migrator; the same runs when none exist yet, for one made before apply`,
  };
}
