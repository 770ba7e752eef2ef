/**
 * How Calico was installed and who keeps it that way (issue 31, item 1): the datastore, the install method, a GitOps
 * owner and where the images come from, judged from objects already read (calico-objects.ts).
 * On the etcd datastore, export, backup and restore read and write etcd itself (calico/etcd-connection.ts), and plan
 * makes calico-etcd.yaml plans (plan/etcd-plan.ts); apply refuses a Kubernetes-datastore plan there by name
 * (`refuseEtcdDatastore`): its steps write the Calico CRDs and calico.yaml.
 */
import { RefusedError } from '../core/errors.js';
import type { KubeClient } from '../kube/client.js';
import { K } from '../kube/builtin.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import { variantOf } from './enterprise.js';
import { imageTag, tagVersion } from './knowledge.js';
import type { HelmRelease } from './helm-release.js';

/** The operator's Installation (one, `default`). */
export const INSTALLATION_TYPE: ResourceType = { group: 'operator.tigera.io', version: 'v1', plural: 'installations', kind: 'Installation', namespaced: false };

/** `calico-etcd.yaml` (3.26-3.32): the ConfigMap kube-system/calico-config holds `etcd_endpoints`, calico-node reads it as ETCD_ENDPOINTS. */
export const CALICO_CONFIG = { namespace: 'kube-system', name: 'calico-config', etcdKey: 'etcd_endpoints' } as const;
/** `canal.yaml`: Calico for policy beside flannel, one DaemonSet `canal` in kube-system. */
export const CANAL_DAEMONSET = { namespace: 'kube-system', name: 'canal' } as const;

export interface DatastoreInfo {
  type: 'kubernetes' | 'etcd';
  /** What said etcd, e.g. `calico-config etcd_endpoints`; absent for the Kubernetes datastore. */
  evidence?: string;
}

export type InstallMethodKind = 'operator-helm' | 'operator-manifest' | 'manifest' | 'canal' | 'rke2-chart' | 'managed-addon' | 'none';

export interface ImageSource {
  component: 'tigera-operator' | 'calico-node';
  image: string;
  /** `docker.io` when the reference names none, as the container runtime reads it. */
  registry: string;
  repository: string;
  tag?: string;
  /** `sha256:...` when the image is pinned by digest. */
  digest?: string;
  /** The upstream version the tag names (`v3.26.3` for `v3.26.3-gke.12`); absent for a digest-only reference. */
  version?: string;
  /** The vendor suffix of the tag (`gke` for `v3.26.3-gke.12`). */
  vendor?: string;
}

export interface GitOpsOwner {
  tool: 'Argo CD' | 'Flux';
  /** Argo CD application, or Flux `Kustomization namespace/name` / `HelmRelease namespace/name`. */
  name: string;
  /** The object carrying the marks, `Kind/namespace/name`. */
  object: string;
  /** The reconciling object the marks name, as gitops.ts reads it (Argo CD: the namespace only when the mark says it). */
  ref: { kind: 'Application' | 'Kustomization' | 'HelmRelease'; name: string; namespace?: string };
}

export interface InstallMethod {
  datastore: DatastoreInfo;
  method: InstallMethodKind;
  /** The Helm release from the operator's annotations; detectCalico adds what Helm's own record says (helm-release.ts). */
  helm?: HelmRelease;
  /** Who reconciles a managed install: AKS, GKE, RKE2 or the cluster's addon manager. */
  managedBy?: string;
  /** The `addonmanager.kubernetes.io/mode` label of a managed add-on: `Reconcile` reverts changes, `EnsureExists` does not. */
  addonMode?: string;
  gitOps: GitOpsOwner[];
  images: ImageSource[];
  /** The Installation's image settings, where the operator pulls every other Calico image from (a mirror). */
  installationImages?: { registry?: string; imagePath?: string; imagePrefix?: string };
  /** The operator's product (enterprise.ts): `TigeraSecureEnterprise` for Calico Enterprise. */
  variant?: 'Calico' | 'TigeraSecureEnterprise';
}

export interface InstallObjects {
  operator?: KubeObject;
  calicoNode?: KubeObject;
  installation?: KubeObject;
  calicoConfig?: KubeObject;
  canal?: KubeObject;
}

async function getOptional(client: KubeClient, r: ResourceType, namespace: string | undefined, name: string): Promise<KubeObject | undefined> {
  try {
    return await client.getOrUndefined(r, namespace, name);
  } catch (err) {
    // No permission to read one of these only leaves that part of the picture unknown.
    if ((err as { statusCode?: number }).statusCode === 403) return undefined;
    throw err;
  }
}

function containers(obj: KubeObject | undefined): any[] {
  return obj?.spec?.template?.spec?.containers ?? [];
}

function container(obj: KubeObject | undefined, name: string): any {
  const cs = containers(obj);
  return cs.find((c) => c.name === name) ?? cs[0];
}

/** etcd when calico-config names etcd endpoints or calico-node/canal reads ETCD_ENDPOINTS, unless calico-node says DATASTORE_TYPE=kubernetes. */
export function datastoreOf(objs: Pick<InstallObjects, 'calicoNode' | 'calicoConfig' | 'canal'>): DatastoreInfo {
  const node = objs.calicoNode ?? objs.canal;
  const env: { name: string; value?: string }[] = container(node, 'calico-node')?.env ?? [];
  // A cluster moved to the Kubernetes datastore may keep its old calico-config; calico-node's own setting wins.
  if (env.some((e) => e.name === 'DATASTORE_TYPE' && e.value === 'kubernetes')) return { type: 'kubernetes' };
  const endpoints = objs.calicoConfig?.data?.[CALICO_CONFIG.etcdKey];
  if (typeof endpoints === 'string' && endpoints.trim() !== '') return { type: 'etcd', evidence: `${CALICO_CONFIG.name} ${CALICO_CONFIG.etcdKey}` };
  if (env.some((e) => e.name === 'ETCD_ENDPOINTS')) return { type: 'etcd', evidence: `${node!.metadata.name} ETCD_ENDPOINTS env` };
  return { type: 'kubernetes' };
}

/** `[registry/]repository[:tag][@digest]`, with the version the tag names. */
export function parseImage(component: ImageSource['component'], image: string): ImageSource {
  const [name, digest] = image.split('@') as [string, string | undefined];
  const tag = imageTag(name);
  const repoPath = tag === undefined ? name : name.slice(0, name.length - tag.length - 1);
  const first = repoPath.split('/')[0]!;
  // As the container runtime reads a reference: the first part is a registry only if it looks like a host.
  const hasRegistry = repoPath.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost');
  const parsed = tag ? tagVersion(tag) : undefined;
  return {
    component,
    image,
    registry: hasRegistry ? first : 'docker.io',
    repository: hasRegistry ? repoPath.slice(first.length + 1) : repoPath,
    ...(tag ? { tag } : {}),
    ...(digest ? { digest } : {}),
    ...(parsed ? { version: parsed.version } : {}),
    ...(parsed?.vendor ? { vendor: parsed.vendor } : {}),
  };
}

const HELM_RELEASE = 'meta.helm.sh/release-name';
const HELM_NAMESPACE = 'meta.helm.sh/release-namespace';
const ADDON_MANAGER = 'addonmanager.kubernetes.io/mode';
/** RKE2 ships Calico as the HelmChart `rke2-calico` (its Helm release has that name). */
const RKE2_RELEASE = 'rke2-calico';

function managerOf(obj: KubeObject, images: ImageSource[]): string {
  const labels = obj.metadata.labels ?? {};
  if (labels['kubernetes.azure.com/managedby'] === 'aks' || images.some((i) => i.registry === 'mcr.microsoft.com')) return 'AKS';
  if (images.some((i) => i.registry.endsWith('gke.gcr.io') || i.repository.startsWith('gke-release/') || i.vendor === 'gke')) return 'GKE';
  return `the cluster's addon manager (${ADDON_MANAGER}: ${labels[ADDON_MANAGER]})`;
}

export function gitOpsOwners(obj: KubeObject | undefined): GitOpsOwner[] {
  if (!obj) return [];
  const labels = obj.metadata.labels ?? {};
  const annotations = obj.metadata.annotations ?? {};
  const kind = obj.kind ?? 'Object';
  const object = obj.metadata.namespace ? `${kind}/${obj.metadata.namespace}/${obj.metadata.name}` : `${kind}/${obj.metadata.name}`;
  const out: GitOpsOwner[] = [];
  const argoApp = labels['argocd.argoproj.io/instance'] ?? annotations['argocd.argoproj.io/tracking-id']?.split(':')[0];
  if (argoApp) out.push({ tool: 'Argo CD', name: `application ${argoApp}`, object, ref: argoAppRef(argoApp) });
  for (const kind of ['kustomize', 'helm'] as const) {
    const name = labels[`${kind}.toolkit.fluxcd.io/name`];
    if (!name) continue;
    const ns = labels[`${kind}.toolkit.fluxcd.io/namespace`];
    const refKind = kind === 'kustomize' ? 'Kustomization' : 'HelmRelease';
    out.push({ tool: 'Flux', name: `${refKind} ${ns ? `${ns}/` : ''}${name}`, object, ref: { kind: refKind, name, ...(ns ? { namespace: ns } : {}) } });
  }
  return out;
}

/**
 * An Argo CD application as its marks name it: `<namespace>_<name>` for an application outside Argo CD's own
 * namespace ("applications in any namespace", Application.InstanceName in argo-cd's pkg/apis/application/v1alpha1/types.go;
 * `_` is never part of a Kubernetes name), else the bare name.
 */
export function argoAppRef(app: string): GitOpsOwner['ref'] {
  const at = app.indexOf('_');
  return at > 0 ? { kind: 'Application', namespace: app.slice(0, at), name: app.slice(at + 1) } : { kind: 'Application', name: app };
}

/** Everything `status` shows about how Calico got here, from objects already read. */
export function installMethod(objs: InstallObjects): InstallMethod {
  const images: ImageSource[] = [];
  const opImage = container(objs.operator, 'tigera-operator')?.image;
  if (opImage) images.push(parseImage('tigera-operator', opImage));
  const nodeImage = container(objs.calicoNode ?? objs.canal, 'calico-node')?.image;
  if (nodeImage) images.push(parseImage('calico-node', nodeImage));
  const gitOps = [objs.operator, objs.installation, objs.calicoNode].flatMap((o) => gitOpsOwners(o));
  const spec = objs.installation?.spec ?? {};
  const mirror = Object.fromEntries(
    (['registry', 'imagePath', 'imagePrefix'] as const).filter((k) => typeof spec[k] === 'string' && spec[k]).map((k) => [k, spec[k]]),
  );
  const variant = variantOf(objs.installation);
  const base = {
    datastore: datastoreOf(objs),
    gitOps,
    images,
    ...(Object.keys(mirror).length ? { installationImages: mirror } : {}),
    ...(variant ? { variant } : {}),
  };
  const managedObj = [objs.operator, objs.calicoNode, objs.canal].find((o) => o?.metadata.labels?.[ADDON_MANAGER]);
  if (managedObj) return { ...base, method: 'managed-addon', managedBy: managerOf(managedObj, images), addonMode: managedObj.metadata.labels![ADDON_MANAGER] };
  const op = objs.operator;
  if (op) {
    const release = op.metadata.annotations?.[HELM_RELEASE];
    const helm = release ? { release, namespace: op.metadata.annotations?.[HELM_NAMESPACE] ?? op.metadata.namespace ?? '' } : undefined;
    if (helm && release === RKE2_RELEASE) return { ...base, method: 'rke2-chart', helm, managedBy: 'RKE2' };
    if (helm) return { ...base, method: 'operator-helm', helm };
    return { ...base, method: 'operator-manifest' };
  }
  if (objs.canal) return { ...base, method: 'canal' };
  if (objs.calicoNode) return { ...base, method: 'manifest' };
  return { ...base, method: 'none' };
}

/** Only what the datastore check needs: three reads in parallel. */
export async function readDatastore(client: KubeClient): Promise<DatastoreInfo> {
  const [calicoConfig, calicoNode, canal] = await Promise.all([
    getOptional(client, K.configMap, CALICO_CONFIG.namespace, CALICO_CONFIG.name),
    getOptional(client, K.daemonSet, 'kube-system', 'calico-node'),
    getOptional(client, K.daemonSet, CANAL_DAEMONSET.namespace, CANAL_DAEMONSET.name),
  ]);
  return datastoreOf({ calicoConfig, calicoNode, canal });
}

/** Refuse (exit 5) plan and apply on a Calico that keeps its data in etcd: their steps would roll out the wrong manifests. */
export function refuseEtcdDatastore(datastore: DatastoreInfo, command: string): void {
  if (datastore.type !== 'etcd') return;
  throw new RefusedError(
    `Calico here keeps its data in etcd (${datastore.evidence}): this ${command} is for the Kubernetes datastore (its steps write the Calico CRDs and calico.yaml, which would cut every program off etcd)`,
    {
      hint: 'make a new plan here with `cni-rewind plan --to VERSION` (it rolls out the calico-etcd.yaml of the target release), or `cni-rewind plan --migrate-datastore` to move to the Kubernetes datastore',
    },
  );
}
