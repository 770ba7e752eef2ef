/** The live Calico objects the plan's findings are computed over, and how they are named. */
import { CALICO_CRD_GROUP, OPERATOR_GROUP } from '../calico/knowledge.js';
import type { KubeObject } from '../kube/types.js';

export interface LiveCalico {
  /** Calico CRDs installed now (crd.projectcalico.org and operator.tigera.io). */
  crds: KubeObject[];
  /** Live objects by CRD name. */
  objects: Map<string, KubeObject[]>;
}

export { objRef } from '../kube/types.js';

/** Groups whose CRDs a plan manages (the shared policy.networking.k8s.io CRDs are never touched). */
export const MANAGED_GROUPS = [CALICO_CRD_GROUP, OPERATOR_GROUP];

export function isManagedCrd(crd: KubeObject): boolean {
  return MANAGED_GROUPS.includes(crd.spec?.group);
}
