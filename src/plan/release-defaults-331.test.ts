import { describe, expect, it } from 'vitest';
import { loadRelease } from '../calico/release.js';
import type { KubeObject } from '../kube/types.js';
import { computeFindings } from './findings.js';

/** 3.32.1 -> 3.30.7 with the real CRDs: the BGPConfiguration field 3.31 added with a structural default. */
describe("serviceLoadBalancerAggregation, which 3.31+'s CRD fills in, needs no --allow-field-loss going below 3.31", async () => {
  const [r330, r332] = await Promise.all(['3.30.7', '3.32.1'].map((v) => loadRelease(v, { offline: true })));
  const errors = (serviceLoadBalancerAggregation: string) =>
    computeFindings(
      {
        crds: r332.crds,
        objects: new Map([
          [
            'bgpconfigurations.crd.projectcalico.org',
            [
              {
                apiVersion: 'crd.projectcalico.org/v1',
                kind: 'BGPConfiguration',
                metadata: { name: 'default' },
                spec: { serviceLoadBalancerAggregation },
              } as KubeObject,
            ],
          ],
        ]),
      },
      r330,
      { version: 'v3.32.1' },
      new Set(),
    ).findings.filter((f) => f.severity === 'error');

  it('Enabled (the default, what 3.30 does) is dropped; Disabled is a setting the downgrade would lose', () => {
    expect(errors('Enabled')).toEqual([]);
    expect(errors('Disabled').map((f) => f.details)).toEqual([['spec.serviceLoadBalancerAggregation (unknown to v3.30.7)']]);
  });
});
