import { describe, expect, it } from 'vitest';
import { loadRelease } from '../calico/release.js';
import { kindsTheOperatorDiscovers, operatorEffectOfCrd } from '../calico/operator-discovery.js';
import type { KubeObject } from '../kube/types.js';
import { computeFindings } from './findings.js';
import { crdsTheTargetOperatorMisreads } from './crd-findings.js';

const MCC = 'managementclusterconnections.operator.tigera.io';

describe('CRDs whose presence changes what the target operator does (discovery.go RequiresTigeraSecure)', async () => {
  const r30 = await loadRelease('3.30.7');
  const r28 = await loadRelease('3.28.1');
  const r29 = await loadRelease('3.29.7');
  const r31 = await loadRelease('3.31.7');
  const live = (objects: Record<string, KubeObject[]> = {}) => ({ crds: r30.crds, objects: new Map(Object.entries(objects)) });

  it("3.30.7 -> 3.28.1: the empty ManagementClusterConnection CRD of 3.30's operator-crds.yaml is deleted, the other extra CRDs are kept", () => {
    expect(crdsTheTargetOperatorMisreads(r30.crds, r28).map((r) => r.crd)).toEqual([MCC]);
    const r = computeFindings(live(), r28, { version: 'v3.30.7' }, new Set());
    const f = r.findings.find((x) => x.id === 'crd-changes-target-operator')!;
    expect(f).toMatchObject({ severity: 'warning', action: 'transform' });
    expect(f.title).toContain(MCC);
    expect(f.details.join(' ')).toMatch(/ManagementClusterConnection: RequiresTigeraSecure/);
    // goldmanes, whiskers, gatewayapis: not looked at by v1.34's discovery, so kept as before
    const kept = r.findings.filter((x) => x.id === 'crd-not-in-target').map((x) => x.title);
    expect(kept.some((t) => t.includes('whiskers.operator.tigera.io'))).toBe(true);
    expect(kept.some((t) => t.includes(MCC))).toBe(false);
  });

  it('refuses when the CRD holds objects (deleting it would delete them)', () => {
    const mcc: KubeObject = { apiVersion: 'operator.tigera.io/v1', kind: 'ManagementClusterConnection', metadata: { name: 'tigera-secure' }, spec: {} };
    const r = computeFindings(live({ [MCC]: [mcc] }), r28, { version: 'v3.30.7' }, new Set());
    expect(r.findings.find((x) => x.id === 'crd-changes-target-operator')).toMatchObject({
      severity: 'error',
      action: 'refuse',
      objects: ['ManagementClusterConnection/tigera-secure'],
    });
  });

  it('3.30.7 -> 3.29.7 deletes it too (v1.36 has the same list); 3.31.7 -> 3.30.7 keeps it (v1.38 dropped the kind)', () => {
    expect(crdsTheTargetOperatorMisreads(r30.crds, r29).map((r) => r.crd)).toEqual([MCC]);
    expect(crdsTheTargetOperatorMisreads(r31.crds, r30)).toEqual([]);
  });

  it('the table follows the upstream lists per operator generation', () => {
    expect(Object.keys(kindsTheOperatorDiscovers('v3.27.4'))).toContain('AmazonCloudIntegration');
    expect(Object.keys(kindsTheOperatorDiscovers('v3.28.1'))).not.toContain('AmazonCloudIntegration');
    expect(Object.keys(kindsTheOperatorDiscovers('v3.28.1'))).toContain('ManagementClusterConnection');
    expect(Object.keys(kindsTheOperatorDiscovers('v3.30.7'))).not.toContain('ManagementClusterConnection');
    const manager = (scope: string) => ({ spec: { group: 'operator.tigera.io', scope, names: { kind: 'Manager' }, versions: [{ name: 'v1', served: true }] } });
    expect(operatorEffectOfCrd(manager('Cluster'), 'v3.28.1')).toBeUndefined();
    expect(operatorEffectOfCrd(manager('Namespaced'), 'v3.28.1')).toMatch(/MultiTenant/);
  });
});

describe("operator kinds the target's operator does not run (3.30's Goldmane and Whisker below 3.30)", async () => {
  const r30 = await loadRelease('3.30.7');
  const r29 = await loadRelease('3.29.7');
  const cr = (kind: string): KubeObject => ({ apiVersion: 'operator.tigera.io/v1', kind, metadata: { name: 'default' }, spec: {} });

  it('3.30.7 -> 3.29.7: the finding says their workloads keep running and how to remove them; empty kinds say nothing of workloads', () => {
    const live = {
      crds: r30.crds,
      objects: new Map(Object.entries({ 'goldmanes.operator.tigera.io': [cr('Goldmane')], 'whiskers.operator.tigera.io': [cr('Whisker')] })),
    };
    const r = computeFindings(live, r29, { version: 'v3.30.7' }, new Set());
    const kept = r.findings.filter((x) => x.id === 'crd-not-in-target');
    const goldmane = kept.find((f) => f.title.includes('goldmanes.operator.tigera.io'))!;
    expect(goldmane).toMatchObject({ severity: 'warning', action: 'keep', objects: ['Goldmane/default'] });
    expect(goldmane.details.join('\n')).toMatch(/workloads a newer operator made for Goldmane\/default .* keep running its images: no v3\.29\.7 component/);
    expect(goldmane.details.join('\n')).toContain('kubectl delete goldmanes.operator.tigera.io --all');
    expect(goldmane.plan).toMatch(/workloads the newer operator made for them keep running/);
    const gateway = kept.find((f) => f.title.includes('gatewayapis.operator.tigera.io'))!;
    expect(gateway.details).toEqual(['0 object(s) stored']);
  });
});
