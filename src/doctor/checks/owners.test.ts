import { describe, expect, it } from 'vitest';
import { makeState } from '../../../test/support/doctor-state.js';
import type { KubeObject } from '../../kube/types.js';
import { runChecks } from '../doctor.js';
import type { NamespaceInfo } from '../state.js';

const apiServer: KubeObject = { apiVersion: 'operator.tigera.io/v1', kind: 'APIServer', metadata: { name: 'default', uid: 'u-api' } };
const installation = (deleting: boolean): KubeObject => ({
  apiVersion: 'operator.tigera.io/v1',
  kind: 'Installation',
  metadata: { name: 'default', uid: 'u-inst', ...(deleting ? { deletionTimestamp: '2026-12-07T03:00:00Z', finalizers: ['tigera.io/operator-cleanup'] } : {}) },
});
const ownedBy = (uid: string, apiVersion = 'operator.tigera.io/v1'): NamespaceInfo => ({
  name: 'calico-apiserver',
  owners: [{ apiVersion, kind: 'APIServer', name: 'default', uid }],
  terminating: false,
});
const said = (objects: KubeObject[], namespaces: NamespaceInfo[]) => {
  const state = makeState({ objects: objects.filter((o) => o.kind !== 'APIServer') });
  state.objects['apiservers.operator.tigera.io'] = objects.filter((o) => o.kind === 'APIServer');
  return runChecks({ ...state, namespaces }).filter((f) => f.id === 'namespace-owner-gone');
};

describe('namespace-owner-gone: a Calico namespace the garbage collector left behind', () => {
  it('is an error while the Installation is stuck deleting, a warning otherwise, with the restart as the fix', () => {
    const [stuck] = said([installation(true)], [ownedBy('u-api')]);
    expect(stuck).toMatchObject({ severity: 'error', objects: ['Namespace/calico-apiserver', 'Installation/default'] });
    expect(stuck!.fix).toMatch(/Restart kube-controller-manager.*kubectl delete namespace calico-apiserver/s);
    // While it is stuck, how to make operator v1.32 see the namespace gone before its periodic reconcile.
    expect(stuck!.fix).toContain('kubectl annotate installation default cni-rewind.io/nudge="$(date +%s)" --overwrite');
    const [warning] = said([installation(false)], [ownedBy('u-api')]);
    expect(warning?.severity).toBe('warning');
    expect(warning?.fix).not.toContain('annotate');
  });

  it('is not said while the owner exists, for another kind of owner, for a namespace being deleted, or from a bundle', () => {
    expect(said([installation(false), apiServer], [ownedBy('u-api')])).toEqual([]);
    expect(said([installation(false)], [ownedBy('u-x', 'example.com/v1')])).toEqual([]);
    expect(said([installation(true)], [{ ...ownedBy('u-api'), terminating: true }])).toEqual([]);
    expect(runChecks(makeState({ objects: [installation(true)] })).map((f) => f.id)).not.toContain('namespace-owner-gone');
  });
});
