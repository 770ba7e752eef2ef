/**
 * Calico's IPAM in the Kubernetes datastore: the crd.projectcalico.org/v1 kinds that restore's read-back, the datastore
 * migration's proof and the demo's population read (one definition, not one per reader).
 */
import type { ResourceType } from '../kube/types.js';
import { CALICO_CRD_GROUP } from './knowledge.js';

const ipam = (plural: string, kind: string): ResourceType => ({ group: CALICO_CRD_GROUP, version: 'v1', plural, kind, namespaced: false });

export const IPAM_TYPES = {
  block: ipam('ipamblocks', 'IPAMBlock'),
  handle: ipam('ipamhandles', 'IPAMHandle'),
  affinity: ipam('blockaffinities', 'BlockAffinity'),
} as const;
