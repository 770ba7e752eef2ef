import { readFileSync } from 'node:fs';
import { loadRelease } from '../../calico/release.js';
import type { KubeClient } from '../../kube/client.js';
import { applyManifests } from '../../kube/manifests.js';
import type { KubeObject } from '../../kube/types.js';
import { LOCAL_CALICO_NODES } from './calico-install.js';
import type { CalicoEtcd } from './calico-etcd.js';
import type { LocalCluster } from './cluster.js';
import { createFakeNodes } from './nodes.js';

/** Where calico-etcd.yaml's pods read the Secret's files (its etcd-certs volume), as its comments ask a user to set. */
const SECRETS_MOUNT = '/calico-secrets';

/**
 * calico-etcd.yaml filled in as its comments ask a user with a TLS etcd to: calico-config's `etcd_endpoints` and
 * the three file settings uncommented (`/calico-secrets/etcd-ca`, `-cert`, `-key`), and the Secret
 * calico-etcd-secrets holding those files base64-encoded. Every other object as released.
 */
export function etcdInstallObjects(objs: KubeObject[], etcd: { endpoint: string; ca: string; cert: string; key: string }): KubeObject[] {
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  let config = false;
  let secret = false;
  const out = objs.map((o) => {
    if (o.kind === 'ConfigMap' && o.metadata.name === 'calico-config' && o.metadata.namespace === 'kube-system') {
      config = true;
      return {
        ...o,
        data: {
          ...o.data,
          etcd_endpoints: etcd.endpoint,
          etcd_ca: `${SECRETS_MOUNT}/etcd-ca`,
          etcd_cert: `${SECRETS_MOUNT}/etcd-cert`,
          etcd_key: `${SECRETS_MOUNT}/etcd-key`,
        },
      };
    }
    if (o.kind === 'Secret' && o.metadata.name === 'calico-etcd-secrets' && o.metadata.namespace === 'kube-system') {
      secret = true;
      return { ...o, data: { 'etcd-ca': b64(etcd.ca), 'etcd-cert': b64(etcd.cert), 'etcd-key': b64(etcd.key) } };
    }
    return o;
  });
  if (!config || !secret) throw new Error('calico-etcd.yaml has no kube-system calico-config ConfigMap or calico-etcd-secrets Secret');
  return out;
}

/**
 * Calico `version` installed on the etcd datastore as a user installs calico-etcd.yaml: the cluster's Calico etcd
 * (started unless it runs; cluster.ts ensureCalicoEtcd) as its datastore, with its CA and client certificate in
 * the Secret; two kwok nodes as for the other installs (calico-install.ts). The supervisor, started with the node
 * side, then runs kube-controllers, calico-node's start-up and tunnel allocator and the CNI plugin in etcd mode.
 */
export async function installCalicoEtcdRelease(
  client: KubeClient,
  cluster: LocalCluster,
  version: string,
  log: (l: string) => void = () => {},
  /** The kwok nodes made for the pods (a test names its own, deleted with its prefix afterwards). */
  nodes: { name: string }[] = LOCAL_CALICO_NODES,
): Promise<CalicoEtcd> {
  const release = await loadRelease(version, { offline: true, need: 'etcd' });
  const etcd = await cluster.ensureCalicoEtcd();
  const read = (f: string) => readFileSync(f, 'utf8');
  const objs = etcdInstallObjects(release.calicoEtcdManifest!, {
    endpoint: etcd.endpoint,
    ca: read(etcd.caFile),
    cert: read(etcd.certFile),
    key: read(etcd.keyFile),
  });
  await createFakeNodes(client, nodes);
  log(`installing Calico ${release.version} on the etcd datastore (calico-etcd.yaml, etcd ${etcd.endpoint}): ${objs.length} objects`);
  await applyManifests(client, objs, { fieldManager: 'cni-rewind-local-cluster' });
  return etcd;
}
