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

describe('namespace-stuck-on-stale-api: a Calico namespace that cannot finish deleting', () => {
  // The condition's message as kube-controller-manager v1.36 wrote it on the node-side night (namespace tigera-operator).
  const message =
    'Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: projectcalico.org/v3: stale GroupVersion discovery: projectcalico.org/v3';
  const ns = (over: Partial<NamespaceInfo>): NamespaceInfo => ({ name: 'tigera-operator', owners: [], terminating: true, discoveryFailure: message, ...over });
  const found = (namespaces: NamespaceInfo[]) => runChecks({ ...makeState({}), namespaces }).filter((f) => f.id === 'namespace-stuck-on-stale-api');

  it('is an error naming the APIService, with its deletion as the fix', () => {
    const [f] = found([ns({})]);
    expect(f).toMatchObject({ severity: 'error', objects: ['Namespace/tigera-operator', 'APIService/v3.projectcalico.org'] });
    expect(f!.fix).toContain('kubectl delete apiservice v3.projectcalico.org');
    expect(f!.why).toContain('stale GroupVersion discovery');
  });

  it('is not said for a namespace not being deleted, or one whose discovery fails for another API', () => {
    expect(found([ns({ terminating: false })])).toEqual([]);
    expect(found([ns({ discoveryFailure: 'metrics.k8s.io/v1beta1: stale GroupVersion discovery: metrics.k8s.io/v1beta1' })])).toEqual([]);
    expect(found([ns({ discoveryFailure: undefined })])).toEqual([]);
  });
});
