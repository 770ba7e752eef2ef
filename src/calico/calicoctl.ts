/**
 * Running the real `calicoctl` for the datastore migration (`calicoctl datastore migrate lock|export|import|unlock`):
 * the program from this run's `--calicoctl` or PATH (never from a plan file), of the very release the cluster runs
 * (calicoctl refuses another cluster version, and its export format is that release's), with a datastore
 * environment made here and nothing of the caller's own Calico settings. Its output is returned, never shown; a
 * failure becomes one line with the last line of calicoctl's own message.
 */
import { execFile } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { EnvironmentError, RefusedError } from '../core/errors.js';
import type { KubeClient } from '../kube/client.js';
import { findExecutable } from '../util/executable.js';
import { makeTempDir } from '../util/temp-dir.js';
import { lastLine } from '../util/last-line.js';
import type { EtcdConnection } from '../etcd/gateway.js';
import { calicoEtcdConnection, type EtcdAccessFlags } from './etcd-connection.js';

/** How calicoctl reaches the Kubernetes datastore: the kubeconfig and context this run uses. */
export interface KubeAccess {
  kubeconfig?: string;
  context?: string;
}

/** Settings of the caller that would point calicoctl elsewhere than where this run says: never passed on. */
const CALICO_ENV = /^(DATASTORE_TYPE|ETCD_|K8S_|KUBECONFIG$|CALICO_)/;

/** The calicoctl to run, or a refusal (exit 5) in one line naming what to give. */
export function resolveCalicoctl(given: string | undefined, what: string, env: NodeJS.ProcessEnv = process.env): string {
  const found = findExecutable('calicoctl', given, env);
  if ('path' in found) return found.path;
  throw new RefusedError(`calicoctl not found: ${found.missing}; ${what}`, {
    hint: "the datastore migration runs Calico's own calicoctl of the cluster's release: pass it with --calicoctl PATH",
  });
}

export function runCalicoctl(bin: string, args: string[], datastoreEnv: Record<string, string>, what: string, timeoutMs = 10 * 60_000): Promise<string> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!CALICO_ENV.test(k)) env[k] = v;
  Object.assign(env, datastoreEnv);
  return new Promise((resolve, reject) => {
    execFile(bin, [...args, '--allow-version-mismatch'], { env, timeout: timeoutMs, maxBuffer: 512 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new EnvironmentError(`${what} failed: ${lastLine(String(stderr)) || lastLine(String(stdout)) || err.message}`, { cause: err }));
      else resolve(String(stdout));
    });
  });
}

/**
 * calicoctl's Client Version must be the cluster's release: `--allow-version-mismatch` above only stops calicoctl
 * from asking the datastore, which is locked or empty during a migration. Refuses (exit 5) another release.
 */
export async function checkCalicoctlVersion(bin: string, version: string): Promise<void> {
  // `calicoctl version` with an unreachable datastore still prints the client's version first.
  const out = await new Promise<string>((resolve) =>
    execFile(
      bin,
      ['version'],
      { env: { PATH: process.env.PATH ?? '', DATASTORE_TYPE: 'kubernetes', KUBECONFIG: '/nonexistent' }, timeout: 60_000 },
      (_e, so, se) => resolve(`${so}\n${se}`),
    ),
  );
  const got = /Client Version:\s*(v?\d+\.\d+\.\d+)/.exec(out)?.[1];
  const want = version.startsWith('v') ? version : `v${version}`;
  if (!got) throw new RefusedError(`${bin} does not say its version (calicoctl version): is it calicoctl?`);
  if ((got.startsWith('v') ? got : `v${got}`) !== want) {
    throw new RefusedError(`${bin} is calicoctl ${got}, and the cluster runs Calico ${want}: the migration needs calicoctl of the same release`, {
      hint: `pass calicoctl ${want} with --calicoctl PATH`,
    });
  }
}

export function kubernetesDatastoreEnv(kube: KubeAccess): Record<string, string> {
  return {
    DATASTORE_TYPE: 'kubernetes',
    ...(kube.kubeconfig ? { KUBECONFIG: path.resolve(kube.kubeconfig) } : process.env.KUBECONFIG ? { KUBECONFIG: process.env.KUBECONFIG } : {}),
    ...(kube.context ? { K8S_CURRENT_CONTEXT: kube.context } : {}),
  };
}

/**
 * Runs `fn` with calicoctl's settings for Calico's etcd, found as calico-node finds it (calico-config, or `config`
 * when given: calico-config's data as read before a step changed it) with the client certificate written to a
 * private folder (0700, files 0600) that is removed afterwards, whatever happens.
 */
export async function withEtcdDatastoreEnv<T>(
  client: KubeClient,
  fn: (env: Record<string, string>) => Promise<T>,
  opts: {
    flags?: EtcdAccessFlags;
    config?: Record<string, string>;
    /** Read already (calicoEtcdConnection): not read again. */ connection?: EtcdConnection;
  } = {},
): Promise<T> {
  const conn = opts.connection ?? (await calicoEtcdConnection(client, opts.flags ?? {}, opts.config));
  const dir = makeTempDir('cni-rewind-calicoctl-');
  try {
    const env: Record<string, string> = { DATASTORE_TYPE: 'etcdv3', ETCD_ENDPOINTS: conn.endpoints.join(',') };
    const files = { ca: 'ETCD_CA_CERT_FILE', cert: 'ETCD_CERT_FILE', key: 'ETCD_KEY_FILE' } as const;
    for (const [field, name] of Object.entries(files) as [keyof typeof files, string][]) {
      const bytes = conn.tls?.[field];
      if (!bytes) continue;
      const file = path.join(dir, field);
      writeFileSync(file, bytes, { mode: 0o600 });
      env[name] = file;
    }
    return await fn(env);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
