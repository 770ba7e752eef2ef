import { describe, expect, it } from 'vitest';
import { isErrorKind } from '../core/errors.js';
import { refuseManagedUpgrade } from './managed-addon.js';

describe('refuseManagedUpgrade', () => {
  const refusal = (managedBy?: string, addonMode = 'Reconcile') => {
    try {
      refuseManagedUpgrade({ method: 'managed-addon', addonMode, ...(managedBy ? { managedBy } : {}) }, '3.29.7');
    } catch (err) {
      return err as Error & { hint?: string };
    }
    return undefined;
  };
  it("names the provider's own procedure and keeps the data commands", () => {
    const aks = refusal('AKS')!;
    expect(isErrorKind(aks, 'refused')).toBe(true);
    expect(aks.message).toContain('managed by AKS');
    expect(aks.hint).toContain('az aks upgrade --kubernetes-version');
    expect(aks.hint).toContain('export, backup, diff and restore');
    expect(refusal('GKE')!.hint).toContain('gcloud container clusters upgrade');
    expect(refusal('RKE2')!.hint).toContain('HelmChartConfig');
    expect(refusal("the cluster's addon manager (addonmanager.kubernetes.io/mode: Reconcile)")!.hint).toContain('addons folder');
  });
  it('lets a self-managed Calico through, and an addon the addon manager only keeps existing (EnsureExists)', () => {
    expect(refusal(undefined)).toBeUndefined();
    expect(refusal("the cluster's addon manager (addonmanager.kubernetes.io/mode: EnsureExists)", 'EnsureExists')).toBeUndefined();
    // A provider manages its Calico whatever mode its objects carry.
    expect(refusal('GKE', 'EnsureExists')).toBeDefined();
  });
});
