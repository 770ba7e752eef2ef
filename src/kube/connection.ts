import { existsSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { readInputFile } from '../io/safe-file.js';
import { KubeConfig } from '@kubernetes/client-node';
import { BadInputError, errorMessage } from '../errors.js';

export interface ConnectionOptions {
  /** Path to a kubeconfig; defaults to $KUBECONFIG, then ~/.kube/config. */
  kubeconfig?: string;
  /** Context to use; defaults to the kubeconfig's current-context. */
  context?: string;
}

export interface Connection {
  server: string;
  contextName: string;
  clusterName: string;
  /** TLS and auth options for node:https, filled by @kubernetes/client-node (certs, tokens, exec plugins). */
  httpsOptions: https.RequestOptions;
}

/** Resolve the kubeconfig path the way kubectl does (first file of $KUBECONFIG wins for our purposes). */
export function kubeconfigPath(opts: ConnectionOptions): string {
  if (opts.kubeconfig) return opts.kubeconfig;
  const env = process.env.KUBECONFIG;
  if (env) {
    const first = env.split(path.delimiter).find((p) => p && existsSync(p));
    if (first) return first;
    return env.split(path.delimiter)[0]!;
  }
  return path.join(os.homedir(), '.kube', 'config');
}

export async function connect(opts: ConnectionOptions): Promise<Connection> {
  const file = kubeconfigPath(opts);
  if (!existsSync(file)) {
    throw new BadInputError(`kubeconfig not found: ${file}`, {
      hint: 'pass --kubeconfig PATH or set KUBECONFIG',
    });
  }
  const kc = new KubeConfig();
  // Read it ourselves first: a FIFO or /dev/zero given as --kubeconfig must fail in one line, not hang.
  const text = readInputFile(file, 'kubeconfig', 4 * 1024 * 1024).data.toString('utf8');
  try {
    kc.loadFromString(text);
    kc.makePathsAbsolute(path.dirname(file));
  } catch (err) {
    throw new BadInputError(`kubeconfig ${file} cannot be read: ${firstLine(errorMessage(err))}`, { cause: err });
  }
  if (opts.context) {
    if (!kc.getContexts().some((c) => c.name === opts.context)) {
      const known = kc.getContexts().map((c) => c.name);
      throw new BadInputError(`context "${opts.context}" not found in ${file}`, {
        hint: known.length ? `known contexts: ${known.join(', ')}` : 'the kubeconfig has no contexts',
      });
    }
    kc.setCurrentContext(opts.context);
  }
  const cluster = kc.getCurrentCluster();
  if (!cluster || !cluster.server) {
    throw new BadInputError(`kubeconfig ${file} has no current cluster`, {
      hint: 'set current-context or pass --context',
    });
  }
  const httpsOptions: https.RequestOptions = {};
  try {
    await kc.applyToHTTPSOptions(httpsOptions);
  } catch (err) {
    throw new BadInputError(`kubeconfig ${file}: credentials cannot be loaded: ${firstLine(errorMessage(err))}`, { cause: err });
  }
  return {
    server: cluster.server.replace(/\/+$/, ''),
    contextName: kc.getCurrentContext(),
    clusterName: cluster.name,
    httpsOptions,
  };
}

function firstLine(s: string): string {
  return s.split('\n')[0] ?? s;
}
