/**
 * The objects that say how Calico is installed, where it keeps its data and who reconciles it, read once, side by
 * side. detectCalico judges them (with ClusterInformation and TigeraStatus); apply's start-of-apply checks (v3-CRD
 * mode, etcd, Calico Enterprise, a GitOps owner) judge them without those; plan hands them on to the GitOps owner
 * judgement. Each object is read once per command start, not once per check.
 */
import { K } from '../kube/builtin.js';
import type { KubeClient } from '../kube/client.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import { CALICO_CONFIG, CANAL_DAEMONSET, datastoreOf, INSTALLATION_TYPE, type DatastoreInfo, type InstallObjects } from './install-method.js';
import { OPERATOR_DEPLOYMENT, OPERATOR_NAMESPACE } from './knowledge.js';

/** installMethod's objects (the operator, the Installation, calico-config, canal), with calico-node in both of its homes. */
export interface CalicoObjects extends Omit<InstallObjects, 'calicoNode'> {
  /** Every CRD's name, `<plural>.<group>`: the groups installed, without the schemas. */
  crdNames: string[];
  /** calico-node of an operator install. */
  calicoNodeSystem?: KubeObject;
  /** calico-node of a manifest install (calico.yaml, calico-etcd.yaml). */
  calicoNodeKube?: KubeObject;
}

/** Not found or not allowed: that part of the picture stays unknown; any other failure is the command's. */
async function getOptional(client: KubeClient, r: ResourceType, namespace: string | undefined, name: string): Promise<KubeObject | undefined> {
  try {
    const obj = await client.getOrUndefined(r, namespace, name);
    // The kind names the object in GitOps marks (`Deployment/tigera-operator/tigera-operator`).
    return obj && { ...obj, kind: obj.kind ?? r.kind };
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode === 403) return undefined;
    throw err;
  }
}

export async function readCalicoObjects(client: KubeClient): Promise<CalicoObjects> {
  const [crds, operator, installation, calicoNodeSystem, calicoNodeKube, calicoConfig, canal] = await Promise.all([
    client.listMetadata(K.crd),
    getOptional(client, K.deployment, OPERATOR_NAMESPACE, OPERATOR_DEPLOYMENT),
    getOptional(client, INSTALLATION_TYPE, undefined, 'default'),
    getOptional(client, K.daemonSet, 'calico-system', 'calico-node'),
    getOptional(client, K.daemonSet, 'kube-system', 'calico-node'),
    getOptional(client, K.configMap, CALICO_CONFIG.namespace, CALICO_CONFIG.name),
    getOptional(client, K.daemonSet, CANAL_DAEMONSET.namespace, CANAL_DAEMONSET.name),
  ]);
  return {
    crdNames: crds.map((c) => c.metadata.name),
    ...(operator ? { operator } : {}),
    ...(installation ? { installation } : {}),
    ...(calicoNodeSystem ? { calicoNodeSystem } : {}),
    ...(calicoNodeKube ? { calicoNodeKube } : {}),
    ...(calicoConfig ? { calicoConfig } : {}),
    ...(canal ? { canal } : {}),
  };
}

/**
 * The datastore as readDatastore judges it (restore, doctor): calico-config beside a manifest install's calico-node
 * (kube-system) or canal. A calico-etcd.yaml install has its calico-node there; an operator's speaks for itself.
 */
export function datastoreOfObjects(objs: CalicoObjects): DatastoreInfo {
  return datastoreOf({ calicoConfig: objs.calicoConfig, calicoNode: objs.calicoNodeKube, canal: objs.canal });
}
