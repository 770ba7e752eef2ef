import { describe, expect, it } from 'vitest';
import { detectCalico } from './detect.js';
import { datastoreOf, installMethod, parseImage, readDatastore, refuseEtcdDatastore } from './install-method.js';
import { tagVersion } from './knowledge.js';
import { isErrorKind } from '../core/errors.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import type { KubeObject, ResourceType } from '../kube/types.js';

/*
 * Objects shaped like the upstream manifests of Calico v3.28.1 (the source archive's manifests/calico-etcd.yaml,
 * manifests/canal.yaml and charts/tigera-operator/templates/tigera-operator/02-tigera-operator.yaml): the names,
 * namespaces, container names and env names are theirs. The Helm annotations and label are the ones Helm 3 itself
 * puts on every object of a release (the chart sets only `k8s-app: tigera-operator`).
 */
const configMapEtcd: KubeObject = {
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: 'calico-config', namespace: 'kube-system' },
  data: { etcd_endpoints: 'https://10.0.0.10:2379', etcd_ca: '', etcd_cert: '', etcd_key: '', calico_backend: 'bird' },
};
function calicoNode(image: string, env: object[], extra: Partial<KubeObject['metadata']> = {}): KubeObject {
  return {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name: 'calico-node', namespace: 'kube-system', labels: { 'k8s-app': 'calico-node' }, ...extra },
    spec: { template: { spec: { containers: [{ name: 'calico-node', image, env }] } } },
  };
}
const etcdEnv = [
  { name: 'ETCD_ENDPOINTS', valueFrom: { configMapKeyRef: { name: 'calico-config', key: 'etcd_endpoints' } } },
  { name: 'ETCD_CA_CERT_FILE', valueFrom: { configMapKeyRef: { name: 'calico-config', key: 'etcd_ca' } } },
];
const kddEnv = [{ name: 'DATASTORE_TYPE', value: 'kubernetes' }];
function operator(image: string, metadata: Partial<KubeObject['metadata']> = {}): KubeObject {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'tigera-operator', namespace: 'tigera-operator', labels: { 'k8s-app': 'tigera-operator' }, ...metadata },
    spec: { replicas: 1, template: { spec: { containers: [{ name: 'tigera-operator', image }] } } },
  };
}

/** A fake API server holding `objects` (404 for the rest), for the reads detection makes; it records each request. */
function fakeClient(objects: KubeObject[]) {
  const calls: string[] = [];
  const find = (r: ResourceType, ns: string | undefined, name: string) =>
    objects.find((o) => o.kind === r.kind && o.metadata.name === name && (o.metadata.namespace ?? undefined) === ns);
  const client = {
    async get(r: ResourceType, ns: string | undefined, name: string) {
      calls.push(`GET ${r.kind} ${name}`);
      const o = find(r, ns, name);
      if (!o) throw new KubeApiError(404, 'NotFound', `${name} not found`, 'GET', `/${r.plural}/${name}`);
      return structuredClone(o);
    },
    async getOrUndefined(r: ResourceType, ns: string | undefined, name: string) {
      calls.push(`GET ${r.kind} ${name}`);
      const o = find(r, ns, name);
      return o && structuredClone(o);
    },
    async listAll(r: ResourceType) {
      calls.push(`LIST ${r.kind}`);
      return objects.filter((o) => o.kind === r.kind);
    },
    async listMetadata(r: ResourceType) {
      calls.push(`LIST ${r.kind}`);
      return objects.filter((o) => o.kind === r.kind).map((o) => ({ metadata: o.metadata }));
    },
  };
  return { client: client as unknown as KubeClient, calls };
}

describe('image tags and versions', () => {
  it('reads the release from a vendor-suffixed tag and keeps the vendor', () => {
    expect(tagVersion('v3.26.3-gke.12')).toEqual({ version: 'v3.26.3', vendor: 'gke' });
    expect(tagVersion('3.28.1')).toEqual({ version: 'v3.28.1' });
    expect(tagVersion('latest')).toBeUndefined();
  });

  it('parses registry, repository, tag and digest as the container runtime reads them', () => {
    expect(parseImage('tigera-operator', 'quay.io/tigera/operator:v1.34.3')).toMatchObject({
      registry: 'quay.io',
      repository: 'tigera/operator',
      tag: 'v1.34.3',
    });
    const digest = 'sha256:' + 'a'.repeat(64);
    const pinned = parseImage('calico-node', `myreg.local:5000/calico/node@${digest}`);
    expect(pinned).toMatchObject({ registry: 'myreg.local:5000', repository: 'calico/node', digest });
    expect(pinned.tag).toBeUndefined();
    expect(parseImage('calico-node', 'gke.gcr.io/calico/node:v3.26.3-gke.12')).toMatchObject({ registry: 'gke.gcr.io', version: 'v3.26.3', vendor: 'gke' });
    expect(parseImage('calico-node', 'calico/node:v3.28.1')).toMatchObject({ registry: 'docker.io', repository: 'calico/node', version: 'v3.28.1' });
  });

  it('detectCalico gives a manifest install with a vendor-suffixed calico-node tag its upstream version', async () => {
    const { client } = fakeClient([calicoNode('gke.gcr.io/calico/node:v3.26.3-gke.12', kddEnv)]);
    const found = await detectCalico(client);
    expect(found.version).toBe('v3.26.3');
    expect(found.versionSource).toBe('calico-node-image');
  });
});

describe('datastore', () => {
  it('is etcd for calico-etcd.yaml: calico-config etcd_endpoints and calico-node ETCD_ENDPOINTS', () => {
    expect(datastoreOf({ calicoConfig: configMapEtcd, calicoNode: calicoNode('docker.io/calico/node:v3.28.1', etcdEnv) })).toEqual({
      type: 'etcd',
      evidence: 'calico-config etcd_endpoints',
    });
    // Without the ConfigMap (not readable, or endpoints inlined): the env alone says etcd.
    expect(datastoreOf({ calicoNode: calicoNode('docker.io/calico/node:v3.28.1', etcdEnv) })).toEqual({
      type: 'etcd',
      evidence: 'calico-node ETCD_ENDPOINTS env',
    });
  });

  it("is Kubernetes for calico.yaml and for a cluster migrated off etcd that kept its calico-config (calico-node's DATASTORE_TYPE wins)", () => {
    expect(datastoreOf({ calicoNode: calicoNode('docker.io/calico/node:v3.28.1', kddEnv) })).toEqual({ type: 'kubernetes' });
    expect(datastoreOf({ calicoConfig: configMapEtcd, calicoNode: calicoNode('docker.io/calico/node:v3.28.1', kddEnv) })).toEqual({ type: 'kubernetes' });
    expect(datastoreOf({ calicoConfig: { ...configMapEtcd, data: { etcd_endpoints: '' } } })).toEqual({ type: 'kubernetes' });
  });

  it('readDatastore makes three reads and the refusal of a Kubernetes-datastore plan names etcd, the evidence and what to do (exit 5)', async () => {
    const { client, calls } = fakeClient([configMapEtcd, calicoNode('docker.io/calico/node:v3.28.1', etcdEnv)]);
    const ds = await readDatastore(client);
    expect(calls).toHaveLength(3);
    let thrown: unknown;
    try {
      refuseEtcdDatastore(ds, 'plan');
    } catch (err) {
      thrown = err;
    }
    expect(isErrorKind(thrown, 'refused')).toBe(true);
    expect((thrown as Error).message).toMatch(
      /^Calico here keeps its data in etcd \(calico-config etcd_endpoints\): this plan is for the Kubernetes datastore/,
    );
    expect((thrown as { hint: string }).hint).toContain('calico-etcd.yaml of the target release');
    expect(() => refuseEtcdDatastore({ type: 'kubernetes' }, 'plan')).not.toThrow();
  });
});

describe('install method', () => {
  const helmMeta = {
    labels: { 'k8s-app': 'tigera-operator', 'app.kubernetes.io/managed-by': 'Helm' },
    annotations: { 'meta.helm.sh/release-name': 'calico', 'meta.helm.sh/release-namespace': 'tigera-operator' },
  };

  it('tells the operator by Helm (release and namespace) from the operator by manifest', () => {
    expect(installMethod({ operator: operator('quay.io/tigera/operator:v1.34.3', helmMeta) })).toMatchObject({
      method: 'operator-helm',
      helm: { release: 'calico', namespace: 'tigera-operator' },
    });
    expect(installMethod({ operator: operator('quay.io/tigera/operator:v1.34.3') }).method).toBe('operator-manifest');
  });

  it("names RKE2's chart, Canal, a calico.yaml manifest and managed add-ons with their manager", () => {
    const rke2 = operator('rancher/mirrored-calico-operator:v1.34.3', {
      annotations: { 'meta.helm.sh/release-name': 'rke2-calico', 'meta.helm.sh/release-namespace': 'kube-system' },
    });
    expect(installMethod({ operator: rke2 })).toMatchObject({ method: 'rke2-chart', managedBy: 'RKE2' });
    const canal: KubeObject = { ...calicoNode('docker.io/calico/node:v3.28.1', kddEnv), metadata: { name: 'canal', namespace: 'kube-system' } };
    expect(installMethod({ canal }).method).toBe('canal');
    expect(installMethod({ calicoNode: calicoNode('docker.io/calico/node:v3.28.1', kddEnv) }).method).toBe('manifest');
    const gke = calicoNode('gke.gcr.io/calico/node:v3.26.3-gke.12', kddEnv, { labels: { 'addonmanager.kubernetes.io/mode': 'Reconcile' } });
    expect(installMethod({ calicoNode: gke })).toMatchObject({ method: 'managed-addon', managedBy: 'GKE' });
    const aks = operator('mcr.microsoft.com/oss/tigera/operator:v1.34.3', { labels: { 'addonmanager.kubernetes.io/mode': 'Reconcile' } });
    expect(installMethod({ operator: aks })).toMatchObject({ method: 'managed-addon', managedBy: 'AKS' });
  });

  it("keeps the Installation's registry, imagePath and imagePrefix (a mirror the operator pulls every Calico image from)", () => {
    const installation: KubeObject = {
      apiVersion: 'operator.tigera.io/v1',
      kind: 'Installation',
      metadata: { name: 'default' },
      spec: { registry: 'myreg.local:5000/', imagePath: 'mirror/calico', imagePrefix: 'cp-' },
    };
    expect(installMethod({ operator: operator('myreg.local:5000/tigera/operator:v1.34.3'), installation }).installationImages).toEqual({
      registry: 'myreg.local:5000/',
      imagePath: 'mirror/calico',
      imagePrefix: 'cp-',
    });
    expect(installMethod({ operator: operator('quay.io/tigera/operator:v1.34.3') }).installationImages).toBeUndefined();
  });

  it('finds Argo CD and Flux owners on the operator, the Installation and calico-node', () => {
    const installation: KubeObject = {
      apiVersion: 'operator.tigera.io/v1',
      kind: 'Installation',
      metadata: { name: 'default', annotations: { 'argocd.argoproj.io/tracking-id': 'calico:operator.tigera.io/Installation:/default' } },
    };
    const op = operator('quay.io/tigera/operator:v1.34.3', {
      labels: { 'helm.toolkit.fluxcd.io/name': 'tigera-operator', 'helm.toolkit.fluxcd.io/namespace': 'flux-system' },
    });
    expect(installMethod({ operator: op, installation }).gitOps).toEqual([
      {
        tool: 'Flux',
        name: 'HelmRelease flux-system/tigera-operator',
        object: 'Deployment/tigera-operator/tigera-operator',
        ref: { kind: 'HelmRelease', name: 'tigera-operator', namespace: 'flux-system' },
      },
      { tool: 'Argo CD', name: 'application calico', object: 'Installation/default', ref: { kind: 'Application', name: 'calico' } },
    ]);
  });
});
