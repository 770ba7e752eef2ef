import { describe, expect, it } from 'vitest';
import { loadRelease } from '../calico/release.js';
import { entry, installationWith, makeState, operatorWorkload, pool } from '../../test/support/doctor-state.js';
import { targetPoolsCheck } from './preflight.js';
import type { InstallationTransform } from './types.js';

const none: InstallationTransform = { removeFields: [], trimPoolsPerFamily: false };

describe('preflight: the pools as the target operator will treat them (calico#9100)', async () => {
  const [v327, v328, v330] = await Promise.all(['3.27.4', '3.28.1', '3.30.7'].map((v) => loadRelease(v, { offline: true })));
  // 3.27.4 as the incident team had it: the default pool disabled (migrated away) and still listed in the Installation.
  const incident = (extra: any = {}) =>
    makeState({
      objects: [
        pool('default-ipv4-ippool', '192.168.0.0/16', { disabled: true, allowedUses: ['Workload', 'Tunnel'] }),
        pool('new-pool', '10.10.0.0/16'),
        installationWith([entry('default-ipv4-ippool', '192.168.0.0/16', extra)]),
      ],
      workloads: [operatorWorkload('v1.32.10')],
    });

  it('blocks an upgrade to 3.28 that would re-enable a disabled listed pool, and prints the fix', () => {
    const c = targetPoolsCheck(incident(), v328, none);
    expect(c.blocking).toBe(true);
    expect(c.ok).toBe(false);
    expect(c.detail).toMatch(/default-ipv4-ippool is disabled, but the tigera operator of the target Calico v3\.28\.1 manages it/);
    expect(c.detail).toMatch(/remove entry 0 \(cidr 192\.168\.0\.0\/16\)/);
  });

  it('passes once the entry stops allocations the 3.28 way, and for a target whose operator does not manage pools', () => {
    expect(targetPoolsCheck(incident({ nodeSelector: '!all()' }), v328, none).ok).toBe(true);
    expect(targetPoolsCheck(incident(), v327, none).ok).toBe(true);
  });

  it('judges the Installation as the plan will write it: the disableNewAllocations -> nodeSelector transform passes', () => {
    const state = makeState({
      objects: [
        pool(
          'default-ipv4-ippool',
          '192.168.0.0/16',
          { disabled: true, allowedUses: ['Workload', 'Tunnel'] },
          { 'app.kubernetes.io/managed-by': 'tigera-operator' },
        ),
        installationWith([entry('default-ipv4-ippool', '192.168.0.0/16', { disableNewAllocations: true })]),
      ],
      workloads: [operatorWorkload('v1.38.13')],
    });
    // Left as it is, the 3.28 operator would re-enable the pool ...
    expect(targetPoolsCheck(state, v328, none).ok).toBe(false);
    // ... with the plan's transform it stays stopped; 3.30 itself honours disableNewAllocations.
    expect(targetPoolsCheck(state, v328, { ...none, stopAllocations: { cidrs: ['192.168.0.0/16'], field: 'nodeSelector', value: '!all()' } }).ok).toBe(true);
    expect(targetPoolsCheck(state, v330, none).ok).toBe(true);
  });
});
