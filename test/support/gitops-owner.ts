/** A judged GitOps owner (src/calico/gitops.ts Reconciler) for the unit tests of what doctor and plan make of it. */
import type { Reconciler } from '../../src/calico/gitops.js';

/** An Argo CD Application `argocd/calico` owning the operator Deployment, in `state`. */
export const argoOwner = (state: Reconciler['state'], blocksApply: boolean): Reconciler => ({
  tool: 'Argo CD',
  kind: 'Application',
  namespace: 'argocd',
  name: 'calico',
  objects: ['Deployment/tigera-operator/tigera-operator'],
  state,
  reason: state === 'unknown' ? 'no Application CRD in this cluster: Argo CD may run in another cluster and manage this one from there' : 'why',
  suspendCommand: 'argocd app set calico --sync-policy none',
  blocksApply,
});
