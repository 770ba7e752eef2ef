/** Fixtures and helpers of test/e2e/plan-manifest.test.ts: calico.yaml installs with admins' edits, their rollout and snapshots. */
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { waitCrdsEstablished } from '../../src/kube/manifests.js';
import { pool } from '../../src/util/pool.js';
import { ResourceResolver } from '../../src/kube/resolver.js';
import type { KubeObject } from '../../src/kube/types.js';
import { releasesDir } from '../support/releases.js';
import { canonicalJson } from '../../src/util/canonical.js';
import { LOCK_NAME, LOCK_NAMESPACE } from '../../src/apply/lock.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { calicoType, deleteNodes, fixtureObjects, resetCalico } from './helpers.js';
import { calicoSnapshot } from './plan-support.js';

export const fixtures = releasesDir();
export const NODES = ['fpm-1', 'fpm-2'];
export const MANIFEST_STEPS = ['preflight', 'apply-crds', 'apply-calico-manifest', 'wait-rollout', 'verify-data'];
export const CLUSTER_INFO = calicoType('clusterinformations', 'ClusterInformation');
export const FELIX = calicoType('felixconfigurations', 'FelixConfiguration');
/** A per-node FelixConfiguration using a 3.28 field (debugPort) that the 3.27 CRD prunes: the plan's schema finding. */
export const FELIX_NODE = 'node.fpm-1';

export const images = (o: KubeObject | undefined): string[] => {
  const s = o?.spec?.template?.spec ?? {};
  return [...(s.initContainers ?? []), ...(s.containers ?? [])].map((c: any) => c.image);
};
export const calicoYaml = (version: string) => fixtureObjects(version, 'calico.yaml');
export const REGISTRY = 'registry.example.internal:5000/calico/';
/** Where the releases pull their images from (`<registry>/calico/`), read from the manifest itself. */
export const RELEASE_REPO = images(calicoYaml('3.28.1').find((o) => o.kind === 'Deployment'))[0]!.replace(/kube-controllers:.*$/, '');

/**
 * calico.yaml as the cluster's admins edited it before applying it, as Calico's docs describe: VXLAN instead of
 * BGP (calico_backend, pool env, bird checks out of the probes), a pod CIDR, the node address interface, the MTU,
 * images from a mirror. A plan must carry these into the target's calico.yaml.
 */
export function withUserEdits(objs: KubeObject[]): KubeObject[] {
  return objs.map((o) => {
    if (o.kind !== 'DaemonSet' && o.kind !== 'Deployment' && !(o.kind === 'ConfigMap' && o.metadata.name === 'calico-config')) return o;
    const c = structuredClone(o);
    if (c.kind === 'ConfigMap') {
      c.data = { ...c.data, calico_backend: 'vxlan', veth_mtu: '1450' };
      return c;
    }
    for (const k of [...(c.spec.template.spec.initContainers ?? []), ...c.spec.template.spec.containers]) k.image = k.image.replace(RELEASE_REPO, REGISTRY);
    if (c.kind === 'DaemonSet') {
      const node = c.spec.template.spec.containers.find((x: any) => x.name === 'calico-node');
      const set = (name: string, value: string) => {
        const e = node.env.find((x: any) => x.name === name);
        if (e) e.value = value;
        else node.env.push({ name, value });
      };
      set('CALICO_IPV4POOL_IPIP', 'Never');
      set('CALICO_IPV4POOL_VXLAN', 'Always');
      set('CALICO_IPV4POOL_CIDR', '10.244.0.0/16');
      set('IP_AUTODETECTION_METHOD', 'interface=ens.*');
      node.livenessProbe.exec.command = ['/bin/calico-node', '-felix-live'];
      node.readinessProbe.exec.command = ['/bin/calico-node', '-felix-ready'];
    }
    return c;
  });
}
/** What the cluster runs after installing (or planning to) `version`: its calico.yaml with the admins' edits. */
export const installedYaml = (version: string) => withUserEdits(calicoYaml(version));
/** calico-node's env (name=value; valueFrom by reference) and probe commands. */
export const nodeSettings = (ds: KubeObject | undefined) => {
  const node = (ds?.spec?.template?.spec?.containers ?? []).find((c: any) => c.name === 'calico-node');
  return {
    env: (node?.env ?? []).map((e: any) => `${e.name}=${e.value ?? (e.valueFrom?.configMapKeyRef ? `cm:${e.valueFrom.configMapKeyRef.key}` : 'ref')}`),
    probes: [node?.livenessProbe?.exec?.command, node?.readinessProbe?.exec?.command],
  };
};
export const crdSchemas = (c: KubeObject) => canonicalJson(c.spec.versions.map((v: any) => ({ name: v.name, schema: v.schema })));

/** What a manifest install is made of, beyond the Calico CRDs and data: the workloads' images and the calico-config ConfigMap. */
export async function manifestSnapshot(client: KubeClient) {
  const ds = await client.getOrUndefined(K.daemonSet, 'kube-system', 'calico-node');
  const kc = await client.getOrUndefined(K.deployment, 'kube-system', 'calico-kube-controllers');
  const cm = await client.getOrUndefined(K.configMap, 'kube-system', 'calico-config');
  const { operator: _op, ...calico } = await calicoSnapshot(client);
  return { ...calico, node: images(ds), nodeSettings: nodeSettings(ds), kubeControllers: images(kc), config: canonicalJson(cm?.data ?? null) };
}

/** Wait until calico-node and calico-kube-controllers run `version`'s images everywhere (kwok makes the pods Ready). */
export async function waitManifestRollout(client: KubeClient, version: string): Promise<void> {
  const want = installedYaml(version).filter((o) => o.kind === 'DaemonSet' || o.kind === 'Deployment');
  await client.waitFor(
    `calico.yaml ${version} workloads rolled out`,
    async () => {
      for (const w of want) {
        const live = await client.getOrUndefined(w.kind === 'DaemonSet' ? K.daemonSet : K.deployment, 'kube-system', w.metadata.name);
        const s = live?.status ?? {};
        if (!live || images(live).join() !== images(w).join() || (s.observedGeneration ?? 0) < (live.metadata.generation ?? 0)) return undefined;
        if (
          w.kind === 'DaemonSet'
            ? !(s.desiredNumberScheduled === NODES.length && s.updatedNumberScheduled === NODES.length && s.numberAvailable === NODES.length)
            : !(s.updatedReplicas === 1 && s.availableReplicas === 1 && s.replicas === 1)
        )
          return undefined;
      }
      return true;
    },
    { timeoutMs: 180_000, intervalMs: 1000 },
  );
}

/** `kubectl create/replace -f calico.yaml` of a release with the admins' edits, exactly (CRDs first), then wait for its rollout. */
export async function installCalicoManifest(client: KubeClient, version: string): Promise<void> {
  const objs = installedYaml(version);
  const resolver = new ResourceResolver(client);
  const put = async (type: any, o: KubeObject) => {
    const live = await client.getOrUndefined(type, o.metadata.namespace, o.metadata.name);
    if (!live) await client.create(type, o);
    else await client.replace(type, { ...o, metadata: { ...o.metadata, resourceVersion: live.metadata.resourceVersion } });
  };
  const crds = objs.filter((o) => o.kind === 'CustomResourceDefinition');
  await pool(crds, 4, (c) => put(K.crd, c));
  await waitCrdsEstablished(
    client,
    crds.map((c) => c.metadata.name),
  );
  for (const o of objs.filter((x) => x.kind !== 'CustomResourceDefinition')) await put(await resolver.forObject(o), o);
  await waitManifestRollout(client, version);
}

/** calico-node writes ClusterInformation default when it starts; kwok runs no calico-node, so the test does. */
export async function calicoNodeStarted(client: KubeClient, version: string): Promise<void> {
  const live = await client.getOrUndefined(CLUSTER_INFO, undefined, 'default');
  const obj = {
    apiVersion: 'crd.projectcalico.org/v1',
    kind: 'ClusterInformation',
    metadata: { name: 'default' },
    spec: { calicoVersion: version, clusterGUID: 'a2f1c1e2b5d84e0c9d6f1b2a3c4d5e6f', clusterType: 'k8s,bgp,kubeadm,kdd', datastoreReady: true },
  };
  if (live) await client.replace(CLUSTER_INFO, { ...obj, metadata: { ...obj.metadata, resourceVersion: live.metadata.resourceVersion } });
  else await client.create(CLUSTER_INFO, obj);
}

/** A clean start for a calico.yaml test: no Calico, no apply lock, the `prefix` nodes of an earlier run gone and `nodes` made (kwok). */
export async function freshManifestCluster(client: KubeClient, prefix: string, nodes: string[] = NODES): Promise<void> {
  await resetCalico(client);
  await client.delete(K.lease, LOCK_NAMESPACE, LOCK_NAME);
  await deleteNodes(client, prefix);
  await createFakeNodes(
    client,
    nodes.map((name) => ({ name })),
  );
}
