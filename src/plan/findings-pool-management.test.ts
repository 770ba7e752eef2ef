import { describe, expect, it } from 'vitest';
import { loadRelease } from '../calico/release.js';
import { entry, installationWith } from '../../test/support/doctor-state.js';
import { computeFindings } from './findings.js';

describe("the finding 'operator-pool-management-changes' on a downgrade (issue 30, path matrix part C)", async () => {
  const [r327, r328, r329, r330] = await Promise.all(['3.27.4', '3.28.5', '3.29.7', '3.30.7'].map((v) => loadRelease(v, { offline: true })));
  // As v1.38.13 defaults it on the path matrix's 3.30.7 install (ippool/defaults.go 205-206, 239-240).
  const inst = installationWith([entry('default-ipv4-ippool', '192.168.0.0/16', { disableNewAllocations: false, assignmentMode: 'Automatic' })]);
  const management = (to: typeof r330) =>
    computeFindings({ crds: r330.crds, objects: new Map([['installations.operator.tigera.io', [inst]]]) }, to, { version: 'v3.30.7' }, new Set())
      .findings.filter((f) => f.id === 'operator-pool-management-changes')
      .map((f) => f.details.join(' '));

  it('is left out where the target operator treats pools as the current one does (v1.36 and v1.38 both stop a pool with disableNewAllocations)', () => {
    // Before: "disableNewAllocations: true becomes disableNewAllocations: true" on every 3.30.7 -> 3.29.7 plan.
    expect(management(r329)).toEqual([]);
  });

  it('says what changes where it does: 3.28 stops a pool by node selector, 3.27 writes no pools', () => {
    expect(management(r328)).toEqual([expect.stringMatching(/disableNewAllocations: true becomes nodeSelector: "!all\(\)"/)]);
    expect(management(r327)).toEqual([expect.stringMatching(/does not write IPPools/)]);
  });
});
