import { describe, expect, it } from 'vitest';
import { loadRelease } from '../calico/release.js';
import type { KubeObject } from '../kube/types.js';
import { leavesPolicyNaming, nameBefore332 } from '../calico/policy-names.js';
import { computeFindings } from './findings.js';

const gnp = (name: string, tier?: string): KubeObject => ({
  apiVersion: 'crd.projectcalico.org/v1',
  kind: 'GlobalNetworkPolicy',
  metadata: { name },
  spec: { selector: 'all()', ...(tier ? { tier } : {}) },
});
const np = (name: string): KubeObject => ({
  apiVersion: 'crd.projectcalico.org/v1',
  kind: 'NetworkPolicy',
  metadata: { name, namespace: 'web' },
  spec: { selector: 'all()' },
});

describe('a downgrade below 3.32 names the default-tier policies 3.32 stores under their v3 names (policy_name_migrator.go)', async () => {
  const [r331, r332] = await Promise.all(['3.31.7', '3.32.1'].map((v) => loadRelease(v, { offline: true })));
  const live = (objs: KubeObject[]) => ({
    crds: r332.crds,
    objects: new Map([
      ['globalnetworkpolicies.crd.projectcalico.org', objs.filter((o) => o.kind === 'GlobalNetworkPolicy')],
      ['networkpolicies.crd.projectcalico.org', objs.filter((o) => o.kind === 'NetworkPolicy')],
    ]),
  });
  const objs = [gnp('deny'), gnp('default.legacy'), gnp('security.audit', 'security'), np('allow-dns')];

  it('3.32.1 -> 3.31.7: deny and web/allow-dns are named, default.legacy and another tier are not', () => {
    const f = computeFindings(live(objs), r331, { version: 'v3.32.1' }, new Set()).findings.find((x) => x.id === 'policies-named-by-3.32');
    expect(f).toMatchObject({ severity: 'warning', action: 'transform', objects: ['NetworkPolicy/web/allow-dns', 'GlobalNetworkPolicy/deny'] });
    expect(f!.details).toContain('GlobalNetworkPolicy/deny: v3.31.7 looks it up as default.deny');
  });

  it('no finding going up to 3.32, between older releases, or without such policies', () => {
    const none = (from: string, to = r331, o = objs) =>
      computeFindings(live(o), to, { version: from }, new Set()).findings.some((x) => x.id === 'policies-named-by-3.32');
    expect(none('v3.31.7', r332)).toBe(false);
    expect(none('v3.31.7')).toBe(false);
    expect(none('v3.32.1', r331, [gnp('default.legacy')])).toBe(false);
  });
});

describe('which changes leave 3.32 policy naming behind', () => {
  it('a downgrade from 3.32 or later to before 3.32, and nothing else', () => {
    expect(leavesPolicyNaming('v3.32.1', 'v3.31.7')).toBe(true);
    expect(leavesPolicyNaming('v3.32.0', 'v3.28.5')).toBe(true);
    expect(leavesPolicyNaming('v3.33.0', 'v3.32.1')).toBe(false);
    expect(leavesPolicyNaming('v3.31.7', 'v3.32.1')).toBe(false);
    expect(leavesPolicyNaming('v3.31.7', 'v3.30.7')).toBe(false);
    expect(leavesPolicyNaming(undefined, 'v3.31.7')).toBe(false);
  });
});

describe('the name each release before 3.32 looks a policy up by (names.TieredPolicyName 3.29-3.31, convertPolicyNameForStorage up to 3.28)', () => {
  const labelled = (name: string, tier: string): KubeObject => ({ ...gnp(name), metadata: { name, labels: { 'projectcalico.org/tier': tier } } });
  it('3.29-3.31: a name without a dot gets the prefix; a dotted one is read as it is', () => {
    expect(nameBefore332(gnp('deny'), 'v3.31.7')).toBe('default.deny');
    expect(nameBefore332(gnp('team.deny'), 'v3.29.7')).toBeUndefined();
    expect(nameBefore332(gnp('default.legacy'), 'v3.31.7')).toBeUndefined();
  });
  it('3.28 and before: every name but knp. and ossg. ones gets the prefix', () => {
    expect(nameBefore332(gnp('deny'), 'v3.28.5')).toBe('default.deny');
    expect(nameBefore332(gnp('team.deny'), 'v3.28.5')).toBe('default.team.deny');
    expect(nameBefore332(gnp('knp.default.x'), 'v3.28.5')).toBeUndefined();
    expect(nameBefore332(gnp('default.legacy'), 'v3.27.5')).toBeUndefined();
  });
  it('another tier, by its spec or, once an older CRD pruned spec.tier, by its projectcalico.org/tier label: never renamed', () => {
    expect(nameBefore332(gnp('calico-system.whisker', 'calico-system'), 'v3.28.5')).toBeUndefined();
    expect(nameBefore332(labelled('calico-system.whisker', 'calico-system'), 'v3.28.5')).toBeUndefined();
    expect(nameBefore332(labelled('deny', 'default'), 'v3.28.5')).toBe('default.deny');
  });
});

describe('a downgrade below 3.29 names the policies of other tiers: 3.28 has none, so they are evaluated differently', async () => {
  const [r285, r297, r307] = await Promise.all(['3.28.5', '3.29.7', '3.30.7'].map((v) => loadRelease(v, { offline: true })));
  const tier = (name: string, spec: Record<string, unknown>): KubeObject => ({
    apiVersion: 'crd.projectcalico.org/v1',
    kind: 'Tier',
    metadata: { name },
    spec,
  });
  const passing: KubeObject = { ...gnp('security.pass-dns', 'security'), spec: { tier: 'security', selector: 'all()', egress: [{ action: 'Pass' }] } };
  const live = (objs: KubeObject[], tiers: KubeObject[]) => ({
    crds: r307.crds,
    objects: new Map([
      ['globalnetworkpolicies.crd.projectcalico.org', objs.filter((o) => o.kind === 'GlobalNetworkPolicy')],
      ['networkpolicies.crd.projectcalico.org', objs.filter((o) => o.kind === 'NetworkPolicy')],
      ['tiers.crd.projectcalico.org', tiers],
    ]),
  });
  const objs = [gnp('security.audit', 'security'), passing, gnp('calico-system.allow-whisker', 'calico-system'), gnp('deny')];
  const tiers = [tier('security', { order: 100 }), tier('calico-system', { order: 100, defaultAction: 'Pass' })];
  const finding = (to = r285, o = objs) =>
    computeFindings(live(o, tiers), to, { version: 'v3.30.7' }, new Set()).findings.find((x) => x.id === 'policy-tiers-lost');

  it('3.30.7 -> 3.28.5: each tier with its order and end, the Pass rules, and nothing rewritten', () => {
    const f = finding();
    expect(f).toMatchObject({
      severity: 'warning',
      action: 'none',
      title: 'v3.28.5 has no policy tiers: 3 policies of tier(s) calico-system, security become default-tier policies, evaluated differently',
      objects: ['GlobalNetworkPolicy/security.audit', 'GlobalNetworkPolicy/security.pass-dns', 'GlobalNetworkPolicy/calico-system.allow-whisker'],
    });
    expect(f!.details).toEqual([
      'tier security (order 100, defaultAction Deny): 2 policies, ordered by their own order among every default-tier policy',
      'tier calico-system (order 100, defaultAction Pass): 1 policies, ordered by their own order among every default-tier policy',
      "traffic a tier's policies applied to but did not act on is no longer ended by the tier's defaultAction: later policies decide it",
      "rules with action Pass (GlobalNetworkPolicy/security.pass-dns) go straight to the endpoint's profiles (Kubernetes namespaces' allow) instead of the next tier",
    ]);
  });

  it('none to 3.29 or later, or with default-tier policies only', () => {
    expect(finding(r297)).toBeUndefined();
    expect(finding(r285, [gnp('deny'), np('allow-dns')])).toBeUndefined();
  });
});
