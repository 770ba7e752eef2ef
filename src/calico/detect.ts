import type { KubeClient } from '../kube/client.js';
import { KubeApiError } from '../kube/client.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import { calicoVersionForOperator, imageTag, tagVersion } from './knowledge.js';
import { v3CrdModeOf, type V3CrdMode } from './v3-crds.js';
import { INSTALLATION_TYPE, installMethod, type InstallMethod } from './install-method.js';
import { readCalicoObjects, type CalicoObjects } from './calico-objects.js';
import { readHelmRelease } from './helm-release.js';

export type InstallType = 'operator' | 'manifest' | 'none';

export interface CalicoInstall {
  installType: InstallType;
  /** Calico version, e.g. `v3.28.1`; undefined when nothing tells it. */
  version?: string;
  /** Where the version was read from. */
  versionSource?: 'clusterinformation' | 'operator-image' | 'calico-node-image';
  operatorImage?: string;
  operatorReplicas?: number;
  calicoNodeImage?: string;
  /** Namespace of the calico-node DaemonSet, when present. */
  calicoNodeNamespace?: string;
  tigeraStatus: { name: string; conditions: { type: string; status: string; reason?: string; message?: string }[] }[];
  /** crd.projectcalico.org CRDs installed. */
  calicoCrds: number;
  /** Calico 3.32's v3-CRD mode (projectcalico.org CRDs), which cni-rewind does not support yet (v3-crds.ts). */
  v3CrdMode?: V3CrdMode;
  /** Datastore, install method, GitOps owners and image sources (install-method.ts). */
  method: InstallMethod;
}

/** ClusterInformation in the Kubernetes datastore (its `default` says calicoVersion and datastoreReady). */
export const CLUSTER_INFO: ResourceType = {
  group: 'crd.projectcalico.org',
  version: 'v1',
  plural: 'clusterinformations',
  kind: 'ClusterInformation',
  namespaced: false,
};
export const TIGERA_STATUS: ResourceType = { group: 'operator.tigera.io', version: 'v1', plural: 'tigerastatuses', kind: 'TigeraStatus', namespaced: false };
export const INSTALLATION: ResourceType = INSTALLATION_TYPE;

async function optional<T>(p: Promise<T>): Promise<T | undefined> {
  try {
    return await p;
  } catch (err) {
    if (err instanceof KubeApiError && (err.statusCode === 404 || err.statusCode === 403)) return undefined;
    throw err;
  }
}

/** What Calico is installed, how, and at which version, read from the live cluster. */
export async function detectCalico(client: KubeClient): Promise<CalicoInstall> {
  return (await readCalico(client)).install;
}

/** detectCalico's answer and the objects it judged, for a command that judges them again (plan's GitOps owners). */
export async function readCalico(client: KubeClient): Promise<{ install: CalicoInstall; objects: CalicoObjects }> {
  const [objects, clusterInfo, statuses] = await Promise.all([
    readCalicoObjects(client),
    optional(client.get(CLUSTER_INFO, undefined, 'default')),
    optional(client.listAll(TIGERA_STATUS)),
  ]);
  const { operator, calicoNodeSystem: nodeSys, calicoNodeKube: nodeKube, crdNames } = objects;
  const operatorImage = containerImage(operator, 'tigera-operator');
  const node = nodeSys ?? nodeKube;
  const calicoNodeImage = containerImage(node, 'calico-node');
  // A CRD's name is <plural>.<group>, so the names tell the group without the schemas.
  const calicoCrds = crdNames.filter((n) => n.endsWith('.crd.projectcalico.org')).length;
  const v3CrdMode = v3CrdModeOf(crdNames);
  const installType: InstallType = operator ? 'operator' : nodeKube || calicoCrds > 0 || v3CrdMode ? 'manifest' : 'none';

  let version: string | undefined;
  let versionSource: CalicoInstall['versionSource'];
  const ciVersion = clusterInfo?.spec?.calicoVersion as string | undefined;
  const opTag = imageTag(operatorImage);
  const nodeTag = imageTag(calicoNodeImage);
  // A mirror's or provider's suffixed tag (`v3.26.3-gke.12`) still names its upstream release.
  const nodeVersion = tagVersion(nodeTag)?.version;
  if (installType === 'manifest' && nodeKube && nodeVersion) {
    // A manifest install is what its calico-node DaemonSet says: ClusterInformation's calicoVersion is written by
    // calico-node when it starts, so it lags a rollout (and names the old release right after calico.yaml of
    // another version was applied). Plans and their resume check must see the applied version.
    version = nodeVersion;
    versionSource = 'calico-node-image';
  } else if (ciVersion && /^v?\d+\.\d+/.test(ciVersion)) {
    version = ciVersion.startsWith('v') ? ciVersion : `v${ciVersion}`;
    versionSource = 'clusterinformation';
  } else if (opTag && calicoVersionForOperator(tagVersion(opTag)?.version ?? opTag)) {
    version = calicoVersionForOperator(tagVersion(opTag)?.version ?? opTag);
    versionSource = 'operator-image';
  } else if (nodeTag) {
    version = nodeVersion ?? nodeTag;
    versionSource = 'calico-node-image';
  }
  const install: CalicoInstall = {
    installType,
    version,
    versionSource,
    operatorImage,
    operatorReplicas: operator?.spec?.replicas,
    calicoNodeImage,
    calicoNodeNamespace: node?.metadata.namespace,
    tigeraStatus: (statuses ?? []).map((s) => ({ name: s.metadata.name, conditions: s.status?.conditions ?? [] })),
    calicoCrds,
    ...(v3CrdMode ? { v3CrdMode } : {}),
    method: await withHelmRecord(client, installMethod({ ...objects, calicoNode: node })),
  };
  return { install, objects };
}

/** A Helm install's chart, revision and value keys from the release's own record (one more read, Helm installs only). */
async function withHelmRecord(client: KubeClient, method: InstallMethod): Promise<InstallMethod> {
  if (!method.helm) return method;
  return { ...method, helm: await readHelmRelease(client, method.helm.release, method.helm.namespace) };
}

function containerImage(obj: KubeObject | undefined, name: string): string | undefined {
  const cs: any[] = obj?.spec?.template?.spec?.containers ?? [];
  return (cs.find((c) => c.name === name) ?? cs[0])?.image;
}
