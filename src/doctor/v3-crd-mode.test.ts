/** Doctor in a cluster whose Calico runs in 3.32's v3-CRD mode (the CRD names: src/calico/v3-crds.test.ts). */
import { describe, expect, it } from 'vitest';
import { makeState, operatorWorkload } from '../../test/support/doctor-state.js';
import { runChecks } from './doctor.js';

// As calico v3.32.1's manifests/v3_projectcalico_org.yaml names them (a few of its 22).
const V3_CRDS = ['felixconfigurations', 'ipamblocks', 'ipamhandles', 'ippools', 'clusterinformations'].map((p) => `${p}.projectcalico.org`);

describe("doctor and Calico's v3-CRD mode", () => {
  it('doctor reports it as its own finding, not as calico-crds-missing (issue 30)', () => {
    const st = {
      ...makeState({ workloads: [operatorWorkload('v1.42.3')], withIpam: false }),
      v3Crds: V3_CRDS,
    };
    const fs = runChecks(st);
    expect(fs.map((f) => f.id)).toEqual(['calico-v3-crd-mode']);
    expect(fs[0]!.title).toMatch(/v3-CRD mode/);
  });
});
