import { describe, expect, it } from 'vitest';
import { loadRelease } from '../calico/release.js';
import type { KubeObject } from '../kube/types.js';
import { leavesPolicyNaming } from '../calico/policy-names.js';
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
