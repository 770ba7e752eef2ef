import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../kube/types.js';
import { compareWithLive } from './plan-object.js';
import { updatedInPlaceNote, whyNotDeleted } from './replace.js';
import type { RestoreAction } from './types.js';

// Installation `default` as the real v1.34.3 operator keeps it (finalizers from pkg/render/finalizers.go).
const installation = (finalizers?: string[]): KubeObject => ({
  apiVersion: 'operator.tigera.io/v1',
  kind: 'Installation',
  metadata: { name: 'default', ...(finalizers ? { finalizers } : {}) },
  spec: { calicoNetwork: { ipPools: [{ cidr: '192.168.0.0/16' }] } },
});
const gns = (finalizers?: string[]): KubeObject => ({
  apiVersion: 'crd.projectcalico.org/v1',
  kind: 'GlobalNetworkSet',
  metadata: { name: 'blocked-ranges', ...(finalizers ? { finalizers } : {}) },
  spec: { nets: ['198.51.100.0/24'] },
});

describe('--existing replace: which live objects are never deleted', () => {
  it('an object with finalizers is not deleted, and the reason names them', () => {
    const why = whyNotDeleted(installation(['tigera.io/operator-cleanup', 'operator.tigera.io/installation-controller']));
    expect(why).toMatch(/finalizers \(tigera\.io\/operator-cleanup, operator\.tigera\.io\/installation-controller\)/);
    expect(whyNotDeleted(gns(['example.com/keep']))).toMatch(/finalizers \(example\.com\/keep\)/);
  });

  it("the operator's custom resources own what the operator renders: not deleted even without finalizers (v1.32 before it adds one)", () => {
    expect(whyNotDeleted(installation())).toMatch(/owner of everything it renders/);
    expect(whyNotDeleted({ apiVersion: 'operator.tigera.io/v1', kind: 'APIServer', metadata: { name: 'default' }, spec: {} })).toMatch(/owner/);
  });

  it('an object others name as their owner is not deleted: the garbage collector would delete them (issue 30)', () => {
    expect(whyNotDeleted(gns(), ['ConfigMap calico-system/x'])).toBe(
      '1 object(s) name it as their owner (ConfigMap calico-system/x): deleted, the garbage collector would delete them',
    );
    const many = ['ConfigMap a/1', 'ConfigMap a/2', 'Secret a/3', 'Role a/4', 'Role a/5'];
    expect(whyNotDeleted(gns(), many)).toMatch(/^5 object\(s\) name it as their owner \(ConfigMap a\/1, ConfigMap a\/2, Secret a\/3 and 2 more\)/);
    // Finalizers are named first: they are what keeps it Terminating.
    expect(whyNotDeleted(gns(['example.com/keep']), many)).toMatch(/^it has finalizers/);
  });

  it('a Calico object without finalizers may be deleted and re-created', () => {
    expect(whyNotDeleted(gns())).toBeUndefined();
    expect(whyNotDeleted(gns([]))).toBeUndefined();
  });

  it('the note says what was done instead', () => {
    expect(updatedInPlaceNote('x')).toBe('updated in place, not deleted and re-created (--existing replace never deletes such an object): x');
  });
});

describe('planning --existing replace (compareWithLive)', () => {
  const action = (): RestoreAction => ({
    ref: { apiVersion: 'operator.tigera.io/v1', kind: 'Installation', name: 'default' },
    id: 'Installation default',
    phase: 'operator',
    action: 'create',
  });
  const desired = (): KubeObject => ({ ...installation(['tigera.io/operator-cleanup']), spec: { calicoNetwork: { ipPools: [{ cidr: '10.0.0.0/16' }] } } });

  it('a differing Installation with finalizers is updated in place, with the reason in its notes (issue 30)', () => {
    const a = action();
    compareWithLive(a, installation(['tigera.io/operator-cleanup']), desired(), 'replace', false);
    expect(a.action).toBe('update');
    expect(a.notes).toEqual([expect.stringMatching(/^updated in place, not deleted and re-created .*finalizers \(tigera\.io\/operator-cleanup\)/)]);
    expect(a.diff).toMatch(/10\.0\.0\.0\/16/);
  });

  it('a differing object without finalizers or dependents is still replaced', () => {
    const a: RestoreAction = {
      ref: { apiVersion: 'crd.projectcalico.org/v1', kind: 'GlobalNetworkSet', name: 'blocked-ranges' },
      id: 'GlobalNetworkSet blocked-ranges',
      phase: 'x',
      action: 'create',
    };
    compareWithLive(a, gns(), { ...gns(), spec: { nets: ['198.51.100.0/25'] } }, 'replace', false);
    expect(a.action).toBe('replace');
    expect(a.notes).toBeUndefined();
  });
});
