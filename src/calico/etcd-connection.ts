/**
 * Where Calico's etcd is and how to prove who we are to it, found as calico-node finds it: calico-etcd.yaml puts the
 * endpoints in ConfigMap kube-system/calico-config (`etcd_endpoints`) and the TLS files' paths in `etcd_ca`,
 * `etcd_cert`, `etcd_key` (`/calico-secrets/etcd-ca`, ...), files mounted from Secret kube-system/calico-etcd-secrets
 * whose keys are those files' names. An install that mounts its certificates from the host (Kubespray's
 * /etc/calico/certs) has no such Secret: the user names the files (`--etcd-ca`, `--etcd-cert`, `--etcd-key`).
 *
 * The certificates are read into memory and never written, logged or put into a bundle.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { EnvironmentError, RefusedError } from '../core/errors.js';
import { EtcdGateway, type EtcdConnection, type EtcdTls } from '../etcd/gateway.js';
import { K } from '../kube/builtin.js';
import type { KubeClient } from '../kube/client.js';
import { CALICO_CONFIG } from './install-method.js';

/** The Secret calico-etcd.yaml mounts at /calico-secrets. */
export const CALICO_ETCD_SECRET = { namespace: 'kube-system', name: 'calico-etcd-secrets' } as const;

/** What the user may give instead of what calico-config says: endpoints (comma-separated) and TLS file paths. */
export interface EtcdAccessFlags {
  etcdEndpoints?: string;
  etcdCa?: string;
  etcdCert?: string;
  etcdKey?: string;
}

const TLS_FIELDS = [
  { field: 'ca', config: 'etcd_ca', flag: 'etcdCa', option: '--etcd-ca' },
  { field: 'cert', config: 'etcd_cert', flag: 'etcdCert', option: '--etcd-cert' },
  { field: 'key', config: 'etcd_key', flag: 'etcdKey', option: '--etcd-key' },
] as const;

export function splitEndpoints(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/**
 * The connection to Calico's etcd: the flags first, then calico-config and calico-etcd-secrets. `configData`: the
 * data of calico-config as read earlier (a datastore migration replaces calico-config with calico.yaml's, which
 * names no etcd, while it still reads etcd).
 */
export async function calicoEtcdConnection(client: KubeClient, flags: EtcdAccessFlags = {}, configData?: Record<string, string>): Promise<EtcdConnection> {
  const data: Record<string, string> = configData ?? (await client.getOrUndefined(K.configMap, CALICO_CONFIG.namespace, CALICO_CONFIG.name))?.data ?? {};
  const endpoints = splitEndpoints(flags.etcdEndpoints ?? data[CALICO_CONFIG.etcdKey] ?? '');
  if (endpoints.length === 0) {
    throw new RefusedError(`no etcd endpoint: ${CALICO_CONFIG.namespace}/${CALICO_CONFIG.name} has no ${CALICO_CONFIG.etcdKey}`, {
      hint: 'name Calico etcd with --etcd-endpoints https://<host>:2379',
    });
  }
  for (const e of endpoints) {
    if (!/^https?:\/\/[^/\s]+\/?$/.test(e)) throw new RefusedError(`etcd endpoint ${JSON.stringify(e)} is not a URL like https://<host>:2379`);
  }
  let secret: Record<string, string> | undefined;
  const tls: EtcdTls = {};
  for (const t of TLS_FIELDS) {
    const file = flags[t.flag];
    if (file) {
      tls[t.field] = await readFile(file).catch((err: NodeJS.ErrnoException) => {
        throw new EnvironmentError(`cannot read ${t.option} ${file}: ${err.code ?? err.message}`);
      });
      continue;
    }
    const podPath = data[t.config]?.trim();
    if (!podPath) continue;
    secret ??= (await client.getOrUndefined(K.secret, CALICO_ETCD_SECRET.namespace, CALICO_ETCD_SECRET.name))?.data ?? {};
    const b64 = secret[path.posix.basename(podPath)];
    if (!b64) {
      throw new RefusedError(
        `calico-config's ${t.config} is ${podPath}, and Secret ${CALICO_ETCD_SECRET.namespace}/${CALICO_ETCD_SECRET.name} has no ${path.posix.basename(podPath)}: the file is mounted from elsewhere`,
        { hint: `give the file this machine can read with ${t.option} <file> (also ${TLS_FIELDS.map((f) => f.option).join(', ')} as needed)` },
      );
    }
    tls[t.field] = Buffer.from(b64, 'base64');
  }
  return { endpoints, tls };
}

/** A gateway to Calico's etcd and the revision it answered with when opened. */
export interface OpenedCalicoEtcd {
  etcd: EtcdGateway;
  endpoints: string[];
  revision: string;
}

/** A gateway to Calico's etcd, checked to answer before anything else is done with it. */
export async function openCalicoEtcd(client: KubeClient, flags: EtcdAccessFlags = {}): Promise<OpenedCalicoEtcd> {
  const conn = await calicoEtcdConnection(client, flags);
  const etcd = new EtcdGateway(conn);
  try {
    return { etcd, endpoints: conn.endpoints, revision: await etcd.revision() };
  } catch (err) {
    throw new EnvironmentError(`cannot reach Calico's etcd: ${(err as Error).message}`, {
      hint: 'check that this machine reaches the endpoints of calico-config (or --etcd-endpoints) with the client certificate calico-node uses',
    });
  }
}
