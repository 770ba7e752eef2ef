/**
 * The plan's word on policy names and tiers across releases (calico/policy-names.ts):
 * - a downgrade from 3.32+ below it names the default-tier policies stored under their v3 names, which the target
 *   could list but not read, change or delete by name, and which the step rename-policies-back gives their old names
 *   again after the rollout;
 * - a downgrade below 3.29 (no tiers in Calico Open Source) names the policies of other tiers, which become
 *   default-tier policies there: how they are evaluated changes, which the field loss of `spec.tier` alone does not say.
 */
import { CALICO_CRD_GROUP, compareVersions } from '../calico/knowledge.js';
import { leavesPolicyNaming, nameBefore332, POLICY_PLURALS, policyTier, TIERED_NAMES_RELEASE } from '../calico/policy-names.js';
import type { Release } from '../calico/release.js';
import type { KubeObject } from '../kube/types.js';
import type { LiveCalico } from './live.js';
import type { PlanFinding } from './types.js';

/** Default-tier policies stored under a name release `target` (before 3.32) does not look them up by (3.32's naming). */
export function policiesNamedBy332(live: LiveCalico, target: string): KubeObject[] {
  return POLICY_PLURALS.flatMap((plural) => live.objects.get(`${plural}.${CALICO_CRD_GROUP}`) ?? []).filter((p) => nameBefore332(p, target));
}

const ref = (p: KubeObject) => `${p.kind}/${p.metadata.namespace ? `${p.metadata.namespace}/` : ''}${p.metadata.name}`;

/** The policy findings of a plan to `target`. */
export function policyFindings(live: LiveCalico, target: Release, current: { version?: string }): PlanFinding[] {
  return [policyNamesFinding(live, target, current), tiersLostFinding(live, target)].filter((f): f is PlanFinding => !!f);
}

/**
 * Below 3.29 there are no tiers: the target's CRDs have no Tier kind and prune `spec.tier`, so every policy is a
 * default-tier policy, evaluated by its `order` among all of them. What a tier did between its policies and the next
 * tier is gone: the end of a tier that applied to an endpoint without acting on the packet (its defaultAction, Deny
 * unless set) and `Pass`, which without a next tier goes to the endpoint's profiles (Kubernetes namespaces' allow).
 */
function tiersLostFinding(live: LiveCalico, target: Release): PlanFinding | undefined {
  if (compareVersions(target.version, TIERED_NAMES_RELEASE) >= 0) return undefined;
  const tiered = POLICY_PLURALS.flatMap((plural) => live.objects.get(`${plural}.${CALICO_CRD_GROUP}`) ?? []).filter((p) => policyTier(p) !== 'default');
  if (!tiered.length) return undefined;
  const tiers = new Map((live.objects.get(`tiers.${CALICO_CRD_GROUP}`) ?? []).map((t) => [t.metadata.name, t]));
  const byTier = new Map<string, KubeObject[]>();
  for (const p of tiered) byTier.set(policyTier(p), [...(byTier.get(policyTier(p)) ?? []), p]);
  const passing = tiered.filter((p) => JSON.stringify([p.spec?.ingress ?? [], p.spec?.egress ?? []]).includes('"action":"Pass"'));
  return {
    id: 'policy-tiers-lost',
    severity: 'warning',
    title: `${target.version} has no policy tiers: ${tiered.length} policies of tier(s) ${[...byTier.keys()].sort().join(', ')} become default-tier policies, evaluated differently`,
    objects: tiered.map(ref),
    details: [
      ...[...byTier].map(([tier, ps]) => {
        const t = tiers.get(tier)?.spec;
        return `tier ${tier} (order ${t?.order ?? 'unset'}, defaultAction ${t?.defaultAction ?? 'Deny'}): ${ps.length} policies, ordered by their own order among every default-tier policy`;
      }),
      "traffic a tier's policies applied to but did not act on is no longer ended by the tier's defaultAction: later policies decide it",
      ...(passing.length
        ? [
            `rules with action Pass (${passing.map(ref).join(', ')}) go straight to the endpoint's profiles (Kubernetes namespaces' allow) instead of the next tier`,
          ]
        : []),
    ],
    action: 'none',
    plan: 'nothing is rewritten: review these policies (their order, the tiers’ defaultAction, any Pass rules) before applying; dropping spec.tier itself needs --allow-field-loss',
  };
}

/** The finding for a downgrade from 3.32+ to a release before it, when such policies exist. */
function policyNamesFinding(live: LiveCalico, target: Release, current: { version?: string }): PlanFinding | undefined {
  if (!leavesPolicyNaming(current.version, target.version)) return undefined;
  const policies = policiesNamedBy332(live, target.version);
  if (!policies.length) return undefined;
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
