import { existsSync } from 'node:fs';
import { imageTag } from '../../calico/knowledge.js';
import type { KubeObject } from '../../kube/types.js';

/**
 * What Calico's node side on a kwok node should run, read from the calico-node pods a real kubelet would start
 * (the rendered DaemonSet's pods, one per node). Pure functions, so the rules are unit-tested without processes.
 */

/** The label both the operator and calico.yaml put on calico-node pods. */
export const CALICO_NODE_SELECTOR = 'k8s-app=calico-node';

/** Reads one key of a ConfigMap (for `valueFrom.configMapKeyRef`); undefined when absent. */
export type ConfigMapLookup = (namespace: string, name: string, key: string) => string | undefined;

export interface NodeSideWanted {
  node: string;
  /** The calico-node pod's uid: a new pod (a rollout) runs start-up again, as a new container would. */
  podUid: string;
  tag: string;
  /** calico-node's environment, resolved as the kubelet would, with the overrides below. */
  env: Record<string, string>;
  /** The CNI network config the pod's install-cni container would write, made for this node (cniPluginConfig). */
  cniTemplate?: string;
  cniMtu?: string;
  /**
   * On the etcd datastore only (calico-etcd.yaml: the pod's env has ETCD_ENDPOINTS): install-cni's ETCD_ENDPOINTS and
   * the calico-node container's Secret volumes, whose files the node side writes on this machine (localSecretPath).
   */
  etcd?: { cniEndpoints?: string; secretMounts: SecretMount[] };
}

/** A Secret volume mounted into a container: the files of its keys under mountPath. */
export interface SecretMount {
  mountPath: string;
  namespace: string;
  secret: string;
}

/** The Secret volumes a container of the pod mounts (what the kubelet would write for it). */
export function secretMounts(pod: KubeObject, container: any): SecretMount[] {
  const volumes: any[] = pod.spec?.volumes ?? [];
  const out: SecretMount[] = [];
  for (const m of container?.volumeMounts ?? []) {
    const secret = volumes.find((v) => v.name === m.name)?.secret?.secretName;
    if (typeof secret === 'string' && typeof m.mountPath === 'string')
      out.push({ mountPath: m.mountPath, namespace: pod.metadata.namespace ?? 'default', secret });
  }
  return out;
}

/** This machine's copy of a file a container reads from a Secret volume: `<dir>/<namespace>/<secret>/<key>`; other paths as they are. */
export function localSecretPath(file: string, mounts: SecretMount[], dir: string): string {
  for (const m of mounts) {
    const base = m.mountPath.replace(/\/+$/, '');
    if (file.startsWith(`${base}/`)) return `${dir}/${m.namespace}/${m.secret}/${file.slice(base.length + 1)}`;
  }
  return file;
}

/**
 * Calico's settings for the etcd datastore (the env calico-etcd.yaml gives calico-node and kube-controllers), the
 * certificate files mapped to this machine's copies; `{}` for an install on the Kubernetes datastore.
 */
export function etcdDatastoreEnv(env: Record<string, string>, mounts: SecretMount[], secretsDir: string): Record<string, string> {
  if (!env.ETCD_ENDPOINTS) return {};
  const file = (k: string) => (env[k] ? localSecretPath(env[k]!, mounts, secretsDir) : '');
  return {
    DATASTORE_TYPE: 'etcdv3',
    ETCD_ENDPOINTS: env.ETCD_ENDPOINTS,
    ETCD_CA_CERT_FILE: file('ETCD_CA_CERT_FILE'),
    ETCD_CERT_FILE: file('ETCD_CERT_FILE'),
    ETCD_KEY_FILE: file('ETCD_KEY_FILE'),
  };
}

/** calico-node pods that want to run: bound to a node, not being deleted, with a calico-node container. */
export function wantedNodeSides(pods: KubeObject[], lookup: ConfigMapLookup): NodeSideWanted[] {
  const out: NodeSideWanted[] = [];
  for (const pod of pods) {
    const node: string | undefined = pod.spec?.nodeName;
    if (!node || pod.metadata.deletionTimestamp) continue;
    const main = (pod.spec?.containers ?? []).find((c: any) => c.name === 'calico-node');
    const tag = imageTag(main?.image);
    if (!tag) continue;
    const ns = pod.metadata.namespace ?? 'default';
    const installCni = (pod.spec?.initContainers ?? []).find((c: any) => c.name === 'install-cni');
    const cniEnv = installCni ? resolveEnv(installCni.env ?? [], ns, node, lookup) : {};
    const env = resolveEnv(main.env ?? [], ns, node, lookup);
    out.push({
      node,
      podUid: pod.metadata.uid ?? '',
      tag,
      env,
      cniTemplate: cniEnv.CNI_NETWORK_CONFIG,
      cniMtu: cniEnv.CNI_MTU,
      ...(env.ETCD_ENDPOINTS ? { etcd: { cniEndpoints: cniEnv.ETCD_ENDPOINTS, secretMounts: secretMounts(pod, main) } } : {}),
    });
  }
  return out;
}

/** A container's env as the kubelet resolves it: plain values, the node name, ConfigMap keys (others are left out). */
export function resolveEnv(env: any[], namespace: string, node: string, lookup: ConfigMapLookup): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of env) {
    if (typeof e?.name !== 'string') continue;
    if (typeof e.value === 'string') out[e.name] = e.value;
    else if (e.valueFrom?.fieldRef?.fieldPath === 'spec.nodeName') out[e.name] = node;
    else if (e.valueFrom?.configMapKeyRef) {
      const v = lookup(namespace, e.valueFrom.configMapKeyRef.name, e.valueFrom.configMapKeyRef.key);
      if (v !== undefined) out[e.name] = v;
    }
  }
  return out;
}

/**
 * The environment calico-node-lite runs with: the pod's, then what differs because it runs out of cluster on a
 * shared machine. The node's address comes from its Node object (127.0.1.N): `first-found` would find this
 * machine's own interfaces, the same for every node, and start-up refuses a second node with the same address.
 * `address` is the node's InternalIP, or 127.0.1.N when the Node reports none (kwok sets no addresses, and the API
 * server drops the status a Node is created with).
 * Typha does not run here: with the operator's FELIX_TYPHA* settings the allocator would wait for it forever, so
 * it uses its local syncer, as calico-node does on a cluster without Typha (calico.yaml's).
 * File logging and the nodename file would land in the machine's /var/log/calico and /var/lib/calico.
 */
export function nodeSideEnv(w: NodeSideWanted, kubeconfig: string, nodeDir: string, address: string, secretsDir = ''): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(w.env)) if (!k.startsWith('KUBERNETES_SERVICE_') && !k.startsWith('FELIX_TYPHA')) env[k] = v;
  return {
    ...env,
    IP_AUTODETECTION_METHOD: 'kubernetes-internal-ip',
    NODENAME: w.node,
    DATASTORE_TYPE: 'kubernetes',
    KUBECONFIG: kubeconfig,
    IP: address,
    IP6: env.IP6 === 'autodetect' ? 'none' : (env.IP6 ?? 'none'),
    CALICO_DISABLE_FILE_LOGGING: 'true',
    CALICO_NODENAME_FILE: `${nodeDir}/nodename`,
    CALICO_STARTUP_LOGLEVEL: env.CALICO_STARTUP_LOGLEVEL ?? 'info',
    // On the etcd datastore: etcdv3 and the pod's etcd settings, its /calico-secrets files this machine's copies.
    ...(w.etcd ? etcdDatastoreEnv(env, w.etcd.secretMounts, secretsDir) : {}),
  };
}

/**
 * The `calico` plugin's network config for one node, as install-cni would write it from the pod's
 * CNI_NETWORK_CONFIG (its placeholders filled in), reduced to the calico plugin (portmap, bandwidth and tuning are
 * not Calico's and touch nothing IPAM sees). `nodename` is set here (and the nodename file made optional) because
 * the plugin would otherwise read /var/lib/calico/nodename, which calico-node writes on a real node and which this
 * machine's clusters would share; logs stay in the cluster's work directory.
 */
export function cniPluginConfig(w: NodeSideWanted, kubeconfig: string, logFile: string, statusDir: string, secretsDir = ''): Record<string, unknown> {
  if (!w.cniTemplate) throw new Error(`the calico-node pod on ${w.node} has no install-cni CNI_NETWORK_CONFIG`);
  const filled = fillEtcdPlaceholders(w, w.cniTemplate, secretsDir)
    .replaceAll('__KUBECONFIG_FILEPATH__', kubeconfig)
    .replaceAll('__KUBERNETES_NODE_NAME__', w.node)
    .replaceAll('__CNI_MTU__', w.cniMtu ?? '1500')
    .replaceAll('__LOG_LEVEL__', 'info');
  const conf = JSON.parse(filled);
  const plugins: any[] = conf.plugins ?? [conf];
  const calico = plugins.find((p) => p.type === 'calico');
  if (!calico) throw new Error(`the CNI network config of ${w.node} has no calico plugin`);
  const out: Record<string, unknown> = { ...calico, cniVersion: conf.cniVersion ?? '0.3.1', name: conf.name ?? 'k8s-pod-network', nodename: w.node };
  // The plugin refuses to run without /var/lib/calico/nodename unless told the file is optional.
  out.nodename_file_optional = true;
  out.log_file_path = logFile;
  out.datastore_type = w.etcd ? 'etcdv3' : 'kubernetes';
  out.kubernetes = { ...(calico.kubernetes ?? {}), kubeconfig };
  if ('endpoint_status_dir' in calico) out.endpoint_status_dir = statusDir;
  return out;
}

/**
 * install-cni's etcd placeholders: the endpoints from its ETCD_ENDPOINTS, each certificate file the path of the
 * copy it makes of the pod's /calico-secrets/etcd-{ca,cert,key} (here: the node side's copy of the Secret's key),
 * "" for a key the Secret lacks (cni-plugin/pkg/install/install.go). A Kubernetes-datastore template has none.
 */
function fillEtcdPlaceholders(w: NodeSideWanted, template: string, secretsDir: string): string {
  if (!w.etcd) return template;
  const copy = (key: string) => {
    const file = localSecretPath(`/calico-secrets/${key}`, w.etcd!.secretMounts, secretsDir);
    return file.startsWith('/calico-secrets/') || !existsSync(file) ? '' : file;
  };
  return template
    .replaceAll('__ETCD_ENDPOINTS__', w.etcd.cniEndpoints ?? '')
    .replaceAll('__ETCD_KEY_FILE__', copy('etcd-key'))
    .replaceAll('__ETCD_CERT_FILE__', copy('etcd-cert'))
    .replaceAll('__ETCD_CA_CERT_FILE__', copy('etcd-ca'));
}

/** The pods that get an address from the CNI plugin: bound to a node the node side runs on, not host-network. */
export function podsForCni(pods: KubeObject[], readyNodes: ReadonlySet<string>): KubeObject[] {
  return pods.filter((p) => readyNodes.has(p.spec?.nodeName) && !p.spec?.hostNetwork && !p.metadata.deletionTimestamp && p.status?.phase === 'Running');
}

/** Each node's address for start-up: its InternalIP, else 127.0.1.<its place among the nodes by name, from 1>. */
export function nodeAddresses(nodes: KubeObject[]): Map<string, string> {
  const out = new Map<string, string>();
  const names = nodes.map((n) => n.metadata.name!).sort();
  for (const n of nodes) {
    const internal = (n.status?.addresses ?? []).find((a: any) => a.type === 'InternalIP' && /^\d+\.\d+\.\d+\.\d+$/.test(a.address))?.address;
    out.set(n.metadata.name!, internal ?? `127.0.1.${(names.indexOf(n.metadata.name!) % 250) + 1}`);
  }
  return out;
}
