import { execFile } from 'node:child_process';
import path from 'node:path';
import { K } from '../../kube/builtin.js';
import type { KubeClient } from '../../kube/client.js';
import type { KubeObject } from '../../kube/types.js';
import { etcdDatastoreEnv, resolveEnv, secretMounts } from './node-side-desired.js';
import { writeSecretVolumes } from './node-side-etcd.js';

/**
 * calico-kube-controllers on the etcd datastore, as calico-etcd.yaml's Deployment (kube-system) runs it: its env
 * resolved as the kubelet would (calico-config's etcd settings, its ENABLED_CONTROLLERS), the certificate files of
 * its Secret volume written on this machine. Undefined for a Deployment without ETCD_ENDPOINTS (the Kubernetes
 * datastore, whose kube-controllers the supervisor runs as before); `missing` while a Secret is not there yet.
 */
export async function kubeControllersEtcdEnv(
  client: KubeClient,
  deployment: KubeObject | undefined,
  secretsDir: string,
): Promise<{ env: Record<string, string>; missing?: string } | undefined> {
  const template = deployment?.spec?.template;
  const container = (template?.spec?.containers ?? []).find((c: any) => c.name === 'calico-kube-controllers');
  if (!container || !(container.env ?? []).some((e: any) => e?.name === 'ETCD_ENDPOINTS')) return undefined;
  const ns = deployment!.metadata.namespace ?? 'default';
  const cms = new Map<string, KubeObject | undefined>();
  for (const e of container.env ?? []) {
    const name = e?.valueFrom?.configMapKeyRef?.name;
    if (name && !cms.has(name)) cms.set(name, await client.getOrUndefined(K.configMap, ns, name));
  }
  const env = resolveEnv(container.env ?? [], ns, '', (_ns, name, key) => cms.get(name)?.data?.[key]);
  const mounts = secretMounts({ apiVersion: 'v1', kind: 'Pod', metadata: { name: deployment!.metadata.name, namespace: ns }, spec: template.spec }, container);
  const missing = await writeSecretVolumes(client, mounts, secretsDir);
  const out = { ...etcdDatastoreEnv(env, mounts, secretsDir), ...(env.ENABLED_CONTROLLERS ? { ENABLED_CONTROLLERS: env.ENABLED_CONTROLLERS } : {}) };
  return missing ? { env: out, missing } : { env: out };
}

/**
 * kube-controllers serves Prometheus metrics on every interface (:9094) unless its configuration `default` says
 * port 0. On the etcd datastore that object lives in etcd: written with the tree's own calicoctl before the start.
 */
export function etcdMetricsOff(binDir: string, env: Record<string, string>): Promise<boolean> {
  const kcc = {
    apiVersion: 'projectcalico.org/v3',
    kind: 'KubeControllersConfiguration',
    metadata: { name: 'default' },
    spec: { controllers: { node: { reconcilerPeriod: '5m' } }, prometheusMetricsPort: 0 },
  };
  return new Promise((resolve) => {
    const child = execFile(
      path.join(binDir, 'calicoctl'),
      ['apply', '-f', '-', '--allow-version-mismatch'],
      { env: { ...process.env, ...env }, timeout: 60_000 },
      (err) => resolve(!err),
    );
    child.stdin?.end(JSON.stringify(kcc));
  });
}
