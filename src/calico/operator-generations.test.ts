import { describe, expect, it } from 'vitest';
import { leftoversUnknownTo } from './operator-generations.js';

describe('leftoversUnknownTo: what newer operator generations leave that the target operator never clears', () => {
  it('below 3.30: the v1.38 whisker, goldmane and guardian finalizers and its TigeraStatus names (tigera/operator v1.38.13)', () => {
    const l = leftoversUnknownTo('v3.29.7');
    expect(l.installationFinalizers).toEqual(
      expect.arrayContaining(['operator.tigera.io/whisker-controller', 'operator.tigera.io/goldmane-controller', 'operator.tigera.io/guardian-controller']),
    );
    expect(l.tigeraStatuses).toEqual(expect.arrayContaining(['whisker', 'goldmane', 'gatewayapi']));
    expect(l.installationFinalizers).not.toContain('operator.tigera.io/installation-controller');
  });

  it('below 3.31: the v1.40 gatewayapi finalizer and kubeproxy-monitor; below 3.32: the istio report v1.42 runs for Calico', () => {
    expect(leftoversUnknownTo('v3.30.7')).toEqual({
      installationFinalizers: ['operator.tigera.io/gatewayapi-controller'],
      tigeraStatuses: ['kubeproxy-monitor', 'istio'],
    });
    expect(leftoversUnknownTo('v3.31.7')).toEqual({ installationFinalizers: [], tigeraStatuses: ['istio'] });
    expect(leftoversUnknownTo('v3.32.1')).toEqual({ installationFinalizers: [], tigeraStatuses: [] });
  });

  it('below 3.28: every generation from v1.34 on, never the finalizer v1.30 and v1.32 use themselves', () => {
    const l = leftoversUnknownTo('v3.27.4');
    expect(l.installationFinalizers).toEqual([
      'operator.tigera.io/installation-controller',
      'operator.tigera.io/apiserver-controller',
      'operator.tigera.io/whisker-controller',
      'operator.tigera.io/goldmane-controller',
      'operator.tigera.io/guardian-controller',
      'operator.tigera.io/gatewayapi-controller',
    ]);
    expect(l.installationFinalizers).not.toContain('tigera.io/operator-cleanup');
  });
});
