import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { K } from '../../kube/builtin.js';
import type { KubeClient } from '../../kube/client.js';
import type { KubeObject } from '../../kube/types.js';
import type { SecretMount } from './node-side-desired.js';

/**
 * What the node side and the supervisor do for an install on the etcd datastore (calico-etcd.yaml) that a kubelet
 * does for the pods: the Secret volumes' files (the etcd certificates) written on this machine for the programs that
 * run out of cluster, and the etcd port carried into a node's network namespace for the CNI plugin.
 */

/**
 * Writes each mounted Secret's keys into `<dir>/<namespace>/<secret>/<key>` (mode 0600: they hold a private key),
 * as the kubelet fills a Secret volume; only what changed is written. Returns what is missing (a Secret not created
 * yet: the pod's container would not start either), or undefined once all are there.
 */
export async function writeSecretVolumes(client: KubeClient, mounts: SecretMount[], dir: string): Promise<string | undefined> {
  for (const m of mounts) {
    const secret = await client.getOrUndefined<KubeObject>(K.secret, m.namespace, m.secret);
    if (!secret) return `Secret ${m.namespace}/${m.secret} not found`;
    const into = path.join(dir, m.namespace, m.secret);
    mkdirSync(into, { recursive: true, mode: 0o700 });
    for (const [key, b64] of Object.entries<string>(secret.data ?? {})) {
      const file = path.join(into, key);
      const bytes = Buffer.from(b64, 'base64');
      if (existsSync(file) && readFileSync(file).equals(bytes)) continue;
      writeFileSync(`${file}.tmp`, bytes, { mode: 0o600 });
      chmodSync(`${file}.tmp`, 0o600);
      renameSync(`${file}.tmp`, file);
    }
  }
  return undefined;
}

/**
 * The port of the first etcd endpoint when it is on 127.0.0.1: the CNI plugin, run in a node's namespace, reaches
 * it only through a bridge (api-bridge.ts), as it reaches the API server. Undefined for any other address.
 */
export function loopbackEtcdPort(endpoints: string | undefined): number | undefined {
  const m = /^https?:\/\/127\.0\.0\.1:(\d+)\/?$/.exec((endpoints ?? '').split(',')[0]!.trim());
  return m ? Number(m[1]) : undefined;
}
