import { describe, expect, it } from 'vitest';
import { nameFrom332, policyNameFor } from '../calico/policy-names.js';
import type { KubeObject } from '../kube/types.js';
import { PolicyNaming } from './policy-naming.js';

const gnp = (name: string, opts: { tier?: string; v3Name?: string } = {}): KubeObject => ({
  apiVersion: 'crd.projectcalico.org/v1',
  kind: 'GlobalNetworkPolicy',
  metadata: { name, ...(opts.v3Name ? { annotations: { 'projectcalico.org/metadata': JSON.stringify({ name: opts.v3Name }) } } : {}) },
  spec: { selector: 'all()', ...(opts.tier ? { tier: opts.tier } : {}) },
});
const np = (name: string): KubeObject => ({
  apiVersion: 'crd.projectcalico.org/v1',
  kind: 'NetworkPolicy',
  metadata: { name, namespace: 'web' },
  spec: { selector: 'all()' },
});

describe('a restored policy is named as the live release stores it (3.32 naming, policy_name_migrator.go)', () => {
  it('3.32+ stores a default-tier policy under its v3 name: the metadata annotation, else the name without default.', () => {
    expect(nameFrom332(gnp('default.deny'))).toBe('deny');
    expect(nameFrom332(gnp('default.a.b'))).toBe('a.b');
    expect(nameFrom332(gnp('default.x', { v3Name: 'x-renamed' }))).toBe('x-renamed');
    expect(nameFrom332(gnp('deny'))).toBeUndefined();
    expect(nameFrom332(gnp('default.deny', { tier: 'default' }))).toBe('deny');
    // Other tiers keep their names (the migrator renames the default tier only).
    expect(nameFrom332(gnp('security.audit', { tier: 'security' }))).toBeUndefined();
    // An annotation that does not parse is no name: the stored name decides.
    const broken = gnp('default.deny');
    broken.metadata.annotations = { 'projectcalico.org/metadata': '{not json' };
    expect(nameFrom332(broken)).toBe('deny');
  });

  it('an older bundle into 3.32+: every default-tier default.<name> gets its v3 name, whatever the bundle release says', () => {
    expect(policyNameFor(gnp('default.deny'), 'v3.31.7', 'v3.32.1')).toBe('deny');
    expect(policyNameFor(np('default.allow-dns'), undefined, 'v3.32.1')).toBe('allow-dns');
    expect(policyNameFor(gnp('deny'), 'v3.32.1', 'v3.32.1')).toBeUndefined();
  });

  it('a 3.32 bundle below 3.32: 3.29-3.31 prefix dotless names, 3.28 all but knp./ossg.; an older bundle is left alone', () => {
    expect(policyNameFor(gnp('deny'), 'v3.32.1', 'v3.31.7')).toBe('default.deny');
    expect(policyNameFor(np('allow-dns'), 'v3.32.1', 'v3.30.7')).toBe('default.allow-dns');
    expect(policyNameFor(gnp('team.audit'), 'v3.32.1', 'v3.31.7')).toBeUndefined();
    expect(policyNameFor(gnp('team.audit'), 'v3.32.1', 'v3.28.5')).toBe('default.team.audit');
    expect(policyNameFor(gnp('knp.default.x'), 'v3.32.1', 'v3.28.5')).toBeUndefined();
    expect(policyNameFor(gnp('deny', { tier: 'security' }), 'v3.32.1', 'v3.31.7')).toBeUndefined();
    expect(policyNameFor(gnp('deny'), 'v3.31.7', 'v3.31.7')).toBeUndefined();
    expect(policyNameFor(gnp('deny'), undefined, 'v3.31.7')).toBeUndefined();
  });

  it('unknown live release, other kinds and other groups: left as they are', () => {
    expect(policyNameFor(gnp('default.deny'), 'v3.31.7', undefined)).toBeUndefined();
    const pool: KubeObject = { apiVersion: 'crd.projectcalico.org/v1', kind: 'IPPool', metadata: { name: 'default.pool' }, spec: {} };
    expect(policyNameFor(pool, 'v3.31.7', 'v3.32.1')).toBeUndefined();
    const v3: KubeObject = { ...gnp('default.deny'), apiVersion: 'projectcalico.org/v3' };
    expect(policyNameFor(v3, 'v3.31.7', 'v3.32.1')).toBeUndefined();
  });

  it('PolicyNaming renames a copy, counts each object once over both passes and names the first five in one line', () => {
    const naming = new PolicyNaming('v3.31.7', 'v3.32.1');
    const original = gnp('default.p0');
    const renamed = naming.named(original);
    expect(renamed.metadata.name).toBe('p0');
    expect(original.metadata.name).toBe('default.p0');
    expect(renamed.spec).toBe(original.spec);
    for (let pass = 0; pass < 2; pass++) for (let i = 0; i < 7; i++) naming.named(gnp(`default.p${i}`));
    expect(naming.named(gnp('kept'))).toEqual(gnp('kept'));
    expect(naming.count).toBe(7);
    expect(naming.summary()).toBe(
      '7 default-tier policy(ies) written under the names Calico v3.32.1 stores them by (the bundle is of v3.31.7): ' +
        'GlobalNetworkPolicy/default.p0 -> p0, GlobalNetworkPolicy/default.p1 -> p1, GlobalNetworkPolicy/default.p2 -> p2, ' +
        'GlobalNetworkPolicy/default.p3 -> p3, GlobalNetworkPolicy/default.p4 -> p4 and 2 more',
    );
    expect(new PolicyNaming('v3.31.7', 'v3.31.7').summary()).toBeUndefined();
  });
});
