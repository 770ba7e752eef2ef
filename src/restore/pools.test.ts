import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../kube/types.js';
import { judgeInstallationPools, judgePool } from './pools.js';

const op = (tag: string) => `quay.io/tigera/operator:${tag}`;
const installation = (ipPools?: unknown[]): KubeObject => ({
  apiVersion: 'operator.tigera.io/v1',
  kind: 'Installation',
  metadata: { name: 'default' },
  spec: { calicoNetwork: ipPools ? { ipPools } : {} },
});
/** A pool the operator manages: labelled as the v3 API writes it, in the projectcalico.org/metadata annotation. */
const managedPool = (name: string, cidr: string): KubeObject => ({
  apiVersion: 'crd.projectcalico.org/v1',
  kind: 'IPPool',
  metadata: { name, annotations: { 'projectcalico.org/metadata': JSON.stringify({ labels: { 'app.kubernetes.io/managed-by': 'tigera-operator' } }) } },
  spec: { cidr },
});
const plainPool = (name: string, cidr: string): KubeObject => ({ apiVersion: 'crd.projectcalico.org/v1', kind: 'IPPool', metadata: { name }, spec: { cidr } });

describe('an Installation a restore writes must not make the operator delete pools', () => {
  const pools = [managedPool('default-ipv4-ippool', '192.168.0.0/16'), plainPool('mine', '10.9.0.0/16')];

  it('refuses an Installation without ipPools under v1.34+ while a managed pool exists (defaulted to [], the pool deleted)', () => {
    const v = judgeInstallationPools(installation(), pools, op('v1.34.3'));
    expect(v?.reason).toMatch(/has no ipPools.*defaults to \[\].*default-ipv4-ippool \(192\.168\.0\.0\/16\).*would delete/);
    expect(v?.fix).toMatch(/kubectl label ippools\.projectcalico\.org default-ipv4-ippool app\.kubernetes\.io\/managed-by-/);
    expect(v?.fix).not.toMatch(/mine/);
    expect(judgeInstallationPools(installation([]), pools, op('v1.36.16'))?.reason).toMatch(/does not list/);
  });

  it('accepts an Installation that lists every managed pool, unmanaged pools, no pools at all, or an operator that does not manage pools', () => {
    expect(judgeInstallationPools(installation([{ cidr: '192.168.0.0/16' }]), pools, op('v1.34.3'))).toBeUndefined();
    expect(judgeInstallationPools(installation(), [plainPool('mine', '10.9.0.0/16')], op('v1.34.3'))).toBeUndefined();
    expect(judgeInstallationPools(installation(), [], op('v1.34.3'))).toBeUndefined();
    expect(judgeInstallationPools(installation(), pools, op('v1.32.10'))).toBeUndefined();
    expect(judgeInstallationPools(installation(), pools, undefined)).toBeUndefined();
  });

  it('refuses a managed bundle pool the bundle Installation does not list (the operator deletes it), not one without an Installation in the bundle', () => {
    const pool = managedPool('extra', '10.20.0.0/16');
    const v = judgePool(pool, installation([{ cidr: '192.168.0.0/16' }]), op('v1.34.3'));
    expect(v.refusal?.reason).toMatch(/does not list it/);
    expect(v.refusal?.fix).toMatch(/kubectl label ippools\.projectcalico\.org extra app\.kubernetes\.io\/managed-by-/);
    expect(judgePool(pool, undefined, op('v1.34.3'))).toMatchObject({ managed: true, note: expect.stringMatching(/live Installation must list it/) });
  });
});
