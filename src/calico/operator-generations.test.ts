import { describe, expect, it } from 'vitest';
import { installationFinalizersOf, leftoversUnknownTo, operatorFinalizersNotOf } from './operator-generations.js';

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
    const istio = [{ crd: 'istios.operator.tigera.io', finalizer: 'operator.tigera.io/calico-istio' }];
    expect(leftoversUnknownTo('v3.30.7')).toEqual({
      installationFinalizers: ['operator.tigera.io/gatewayapi-controller'],
      tigeraStatuses: ['kubeproxy-monitor', 'istio'],
      customResourceFinalizers: istio,
    });
    expect(leftoversUnknownTo('v3.31.7')).toEqual({ installationFinalizers: [], tigeraStatuses: ['istio'], customResourceFinalizers: istio });
    expect(leftoversUnknownTo('v3.32.1')).toEqual({ installationFinalizers: [], tigeraStatuses: [], customResourceFinalizers: [] });
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

/** tigera/operator pkg/render/finalizers.go of each tag (v1.32.10 and older: core_controller.go CalicoFinalizer), as read. */
const UPSTREAM: [string, string, string[]][] = [
  ['v3.27.4', 'v1.32.10', ['tigera.io/operator-cleanup']],
  ['v3.28.1', 'v1.34.3', ['tigera.io/operator-cleanup', 'operator.tigera.io/installation-controller', 'operator.tigera.io/apiserver-controller']],
  ['v3.29.7', 'v1.36.16', ['tigera.io/operator-cleanup', 'operator.tigera.io/installation-controller', 'operator.tigera.io/apiserver-controller']],
  [
    'v3.30.7',
    'v1.38.13',
    [
      'tigera.io/operator-cleanup',
      'operator.tigera.io/installation-controller',
      'operator.tigera.io/apiserver-controller',
      'operator.tigera.io/whisker-controller',
      'operator.tigera.io/goldmane-controller',
      'operator.tigera.io/guardian-controller',
    ],
  ],
];

describe("installationFinalizersOf: each minor's operator's own Installation finalizers", () => {
  it.each(UPSTREAM)('Calico %s (operator %s)', (calico, _operator, want) => {
    expect([...installationFinalizersOf(calico)].sort()).toEqual([...want].sort());
  });

  it('3.31 and 3.32 (v1.40.15, v1.42.3) add gatewayapi-controller to the 3.30 set', () => {
    for (const v of ['v3.31.7', 'v3.32.1'])
      expect([...installationFinalizersOf(v)].sort()).toEqual([...UPSTREAM[3]![2], 'operator.tigera.io/gatewayapi-controller'].sort());
  });
});

describe('operatorFinalizersNotOf: the operator finalizers a target operator never clears', () => {
  const V138 = UPSTREAM[3]![2];
  it("3.30 -> 3.29: whisker, goldmane and guardian; never the ones v1.36 clears itself, never another tool's", () => {
    expect(operatorFinalizersNotOf([...V138, 'example.com/hold'], 'v3.29.7')).toEqual([
      'operator.tigera.io/whisker-controller',
      'operator.tigera.io/goldmane-controller',
      'operator.tigera.io/guardian-controller',
    ]);
  });

  it('a name no generation lists counts (a newer operator would put its own back); upgrades leave known ones', () => {
    expect(operatorFinalizersNotOf(['operator.tigera.io/future-controller', 'tigera.io/operator-cleanup'], 'v3.32.1')).toEqual([
      'operator.tigera.io/future-controller',
    ]);
    expect(operatorFinalizersNotOf(installationFinalizersOf('v3.28.1'), 'v3.30.7')).toEqual([]);
  });

  it('an operator of no known generation is taken to define none', () => {
    expect(operatorFinalizersNotOf(['tigera.io/operator-cleanup', 'example.com/hold'], undefined)).toEqual(['tigera.io/operator-cleanup']);
  });
});
