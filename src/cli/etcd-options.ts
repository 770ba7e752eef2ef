/**
 * The options that name Calico's etcd when calico-config and Secret calico-etcd-secrets do not (an install that mounts
 * its certificates from the host): export, backup, restore, plan and apply of an etcd-datastore Calico.
 */
import type { Argv } from 'yargs';
import type { EtcdAccessFlags } from '../calico/etcd-connection.js';

export interface EtcdArgs {
  'etcd-endpoints'?: string;
  'etcd-ca'?: string;
  'etcd-cert'?: string;
  'etcd-key'?: string;
}

export function etcdOptions<T>(y: Argv<T>): Argv<T> {
  return y
    .option('etcd-endpoints', {
      type: 'string',
      describe: "etcd datastore: Calico's etcd client URLs, comma-separated (default: calico-config etcd_endpoints)",
    })
    .option('etcd-ca', { type: 'string', describe: 'etcd datastore: CA certificate file (default: from Secret kube-system/calico-etcd-secrets)' })
    .option('etcd-cert', { type: 'string', describe: 'etcd datastore: client certificate file (default: from calico-etcd-secrets)' })
    .option('etcd-key', { type: 'string', describe: 'etcd datastore: client key file (default: from calico-etcd-secrets)' }) as Argv<T>;
}

/** The flags given, as the engine takes them (undefined when none). */
export function etcdAccess(args: EtcdArgs): EtcdAccessFlags | undefined {
  const out: EtcdAccessFlags = {
    ...(args['etcd-endpoints'] ? { etcdEndpoints: args['etcd-endpoints'] } : {}),
    ...(args['etcd-ca'] ? { etcdCa: args['etcd-ca'] } : {}),
    ...(args['etcd-cert'] ? { etcdCert: args['etcd-cert'] } : {}),
    ...(args['etcd-key'] ? { etcdKey: args['etcd-key'] } : {}),
  };
  return Object.keys(out).length ? out : undefined;
}
