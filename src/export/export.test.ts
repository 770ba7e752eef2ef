import { describe, expect, it } from 'vitest';
import { defaultBundleName, isCalicoCrd } from './export.js';

const crd = (group: string, kind: string) =>
  ({ apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', metadata: { name: 'x' }, spec: { group, names: { kind } } }) as any;

describe('export helpers', () => {
  it('selects the Calico groups and only the Calico-shipped kinds of the shared policy group', () => {
    expect(isCalicoCrd(crd('crd.projectcalico.org', 'SomethingNew'))).toBe(true);
    expect(isCalicoCrd(crd('operator.tigera.io', 'Whisker'))).toBe(true);
    expect(isCalicoCrd(crd('policy.networking.k8s.io', 'AdminNetworkPolicy'))).toBe(true);
    expect(isCalicoCrd(crd('policy.networking.k8s.io', 'ClusterNetworkPolicy'))).toBe(true); // Calico 3.32 ships it
    expect(isCalicoCrd(crd('policy.networking.k8s.io', 'ExamplePolicy'))).toBe(false);
    expect(isCalicoCrd(crd('example.com', 'IPPool'))).toBe(false);
  });
  it('names bundles <cluster-name>-<UTC timestamp>, safe as a directory name', () => {
    expect(defaultBundleName('prod/eu 1', new Date('2026-12-02T11:55:39.123Z'))).toBe('prod-eu-1-20261202T115539Z');
    expect(defaultBundleName('', new Date('2026-01-01T00:00:00Z'))).toBe('cluster-20260101T000000Z');
  });
});
