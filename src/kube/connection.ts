import { spawn, type SpawnOptions } from 'node:child_process';
import { accessSync, constants, existsSync, statSync, type Stats } from 'node:fs';
import type https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import type { Cluster, Context, KubeConfig, User } from '@kubernetes/client-node';
import { BadInputError, EnvironmentError, errorMessage, isErrorKind } from '../core/errors.js';
import { readInputFile } from '../io/safe-file.js';
import { proxyFor } from '../net/proxy.js';
import { useWorkingOidcClient, type LibraryOidcAuthenticator } from './oidc.js';

export interface ConnectionOptions {
  /** Path to a kubeconfig; defaults to the merged $KUBECONFIG list, then ~/.kube/config, then in-cluster config. */
  kubeconfig?: string;
  /** Context to use; defaults to the kubeconfig's current-context. */
  context?: string;
  /** Impersonate this user (`--as`). */
  as?: string;
  /** Impersonate these groups (`--as-group`). */
  asGroups?: string[];
}

export interface Connection {
  server: string;
  contextName: string;
  clusterName: string;
  /** Who the requests are made as, for messages: the impersonated user, else the kubeconfig user. */
  userName: string;
  /** Where the configuration came from (files, or "in-cluster service account"), for messages. */
  source: string;
  /** TLS material for the agent (CA, client certificate, server name). */
  tls: https.AgentOptions;
  /** The proxy requests go through (kubeconfig `proxy-url`, else HTTPS_PROXY/NO_PROXY), if any. */
  proxy?: string;
  /** Headers that carry the credentials and impersonation, refreshed before the credentials expire. */
  authHeaders(): Promise<Record<string, string | string[]>>;
  /**
   * After a 401: drop cached credentials and fetch new ones (exec plugin, OIDC refresh, token file).
   * Returns false when the credentials cannot be refreshed (a static token or certificate): retrying is pointless.
   */
  refreshCredentials(): Promise<boolean>;
}

/** Where a Pod finds its service-account credentials; CNI_REWIND_POD_ROOT prefixes it (tests lay the files out there). */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
const podRoot = (): string => process.env.CNI_REWIND_POD_ROOT ?? '';

/** The kubeconfig files kubectl would read: --kubeconfig, else every existing file of $KUBECONFIG, else ~/.kube/config. */
export function kubeconfigFiles(opts: ConnectionOptions): { files: string[]; looked: string[] } {
  if (opts.kubeconfig) return { files: existsSync(opts.kubeconfig) ? [opts.kubeconfig] : [], looked: [opts.kubeconfig] };
  const env = process.env.KUBECONFIG;
  const looked = env ? env.split(path.delimiter).filter(Boolean) : [path.join(os.homedir(), '.kube', 'config')];
  return { files: [...new Set(looked)].filter((f) => existsSync(f)), looked };
}

function inClusterAvailable(): boolean {
  return !!process.env.KUBERNETES_SERVICE_HOST && !!process.env.KUBERNETES_SERVICE_PORT && existsSync(path.join(podRoot() + SERVICE_ACCOUNT_DIR, 'token'));
}

export async function connect(opts: ConnectionOptions): Promise<Connection> {
  // @kubernetes/client-node is most of what a start would load: only commands that talk to a cluster pay for it, and
  // they load it as the one file the build bundles it into (kube-library.ts).
  const { KubeConfig } = await import('./kube-library.js');
  const { files, looked } = kubeconfigFiles(opts);
  const kc = new KubeConfig();
  let source: string;
  if (files.length) {
    loadMerged(kc, KubeConfig, files);
    source = files.join(path.delimiter);
  } else if (!opts.kubeconfig && inClusterAvailable()) {
    kc.loadFromCluster(podRoot());
    source = 'the in-cluster service account';
  } else {
    // Like an unreachable cluster, a kubeconfig that is not there is the environment, not the command's input (exit 4).
    throw new EnvironmentError(`kubeconfig not found: ${looked.join(path.delimiter)}`, {
      hint: 'pass --kubeconfig PATH or set KUBECONFIG (inside a Pod, the service account is used when KUBERNETES_SERVICE_HOST is set)',
    });
  }
  if (opts.context) {
    if (!kc.getContexts().some((c) => c.name === opts.context)) {
      const known = kc.getContexts().map((c) => c.name);
      throw new BadInputError(`context "${opts.context}" not found in ${source}`, {
        hint: known.length ? `known contexts: ${known.join(', ')}` : 'the kubeconfig has no contexts',
      });
    }
    kc.setCurrentContext(opts.context);
  }
  const cluster = kc.getCurrentCluster();
  if (!cluster || !cluster.server) {
    throw new BadInputError(`kubeconfig ${source} has no current cluster`, { hint: 'set current-context or pass --context' });
  }
  const user = kc.getCurrentUser();
  inlineReferencedFiles(cluster, user);
  keepExecEnvToThePlugin(kc, user);
  if (user?.authProvider?.name === 'oidc') useWorkingOidcClient(libraryAuthenticators(kc).oidc);
  const tlsOpts: https.RequestOptions = {};
  try {
    await kc.applyToHTTPSOptions(tlsOpts);
  } catch (err) {
    throw new EnvironmentError(`kubeconfig ${source}: credentials cannot be loaded: ${firstLine(errorMessage(err))}`, { cause: err });
  }
  const creds = new Credentials(kc, user, opts, tlsOpts);
  return {
    server: cluster.server.replace(/\/+$/, ''),
    contextName: kc.getCurrentContext(),
    clusterName: cluster.name,
    userName: opts.as ?? user?.name ?? 'anonymous',
    source,
    tls: {
      ca: tlsOpts.ca,
      cert: tlsOpts.cert,
      key: tlsOpts.key,
      pfx: tlsOpts.pfx,
      passphrase: tlsOpts.passphrase,
      rejectUnauthorized: tlsOpts.rejectUnauthorized,
      servername: tlsOpts.servername,
    },
    proxy: await proxyFor(cluster.server, cluster.proxyUrl),
    authHeaders: () => creds.headers(),
    refreshCredentials: () => creds.refresh(),
  };
}

/**
 * Merge kubeconfig files as kubectl does: the first file that names a cluster, user or context wins,
 * and the first current-context set wins. (The library's loadFromDefault lets later files override the
 * current-context and throws on names defined twice, so only its per-file loading is used.)
 */
function loadMerged(kc: KubeConfig, Ctor: typeof KubeConfig, files: string[]): void {
  const clusters: Cluster[] = [];
  const users: User[] = [];
  const contexts: Context[] = [];
  let currentContext: string | undefined;
  for (const file of files) {
    const one = new Ctor();
    // Read it ourselves first: a FIFO or /dev/zero given as --kubeconfig must fail in one line, not hang.
    const text = readKubeconfigFile(file);
    try {
      one.loadFromString(text);
      one.makePathsAbsolute(path.dirname(file));
    } catch (err) {
      throw new BadInputError(`kubeconfig ${file} cannot be read: ${firstLine(errorMessage(err))}`, { cause: err });
    }
    for (const c of one.getClusters()) if (!clusters.some((x) => x.name === c.name)) clusters.push(c);
    for (const u of one.getUsers()) if (!users.some((x) => x.name === u.name)) users.push(u);
    for (const c of one.getContexts()) if (!contexts.some((x) => x.name === c.name)) contexts.push(c);
    currentContext ||= one.getCurrentContext();
  }
  kc.loadFromOptions({ clusters, users, contexts, currentContext });
}

/**
 * A kubeconfig's text. One that cannot be read as a file (a directory, a FIFO, a device, no permission) is an
 * environment error, as a missing one is; one too large to be a kubeconfig stays bad input, as bad YAML does.
 */
function readKubeconfigFile(file: string): string {
  let st: Stats;
  try {
    st = statSync(file);
  } catch (err) {
    throw new EnvironmentError(`kubeconfig ${file} cannot be read: ${(err as NodeJS.ErrnoException).code ?? errorMessage(err)}`, { cause: err });
  }
  try {
    if (st.isFile()) accessSync(file, constants.R_OK);
    return readInputFile(file, 'kubeconfig', 4 * 1024 * 1024).data.toString('utf8');
  } catch (err) {
    if (st.isFile() && isErrorKind(err, 'bad-input')) throw err;
    throw new EnvironmentError(errorMessage(err).replace(/^cannot read kubeconfig/, `kubeconfig ${file} cannot be read:`), { cause: err });
  }
}

/** The most a certificate, key or token file a kubeconfig names may hold (a long chain of PEM certificates fits). */
const MAX_CREDENTIAL_FILE_BYTES = 1024 * 1024;

/**
 * Read the files the kubeconfig names for the current cluster and user ourselves, as regular files of a bounded
 * size, and hand the library their contents: it reads them whole with no check, so `certificate-authority:
 * /dev/zero` grew without end and a FIFO hung the command. A token file (read again at each refresh) is checked.
 */
function inlineReferencedFiles(cluster: Cluster, user: User | null): void {
  const read = (file: string, what: string) => readInputFile(file, `the kubeconfig's ${what}`, MAX_CREDENTIAL_FILE_BYTES).data.toString('base64');
  const c = cluster as { caFile?: string; caData?: string };
  if (c.caFile) [c.caData, c.caFile] = [read(c.caFile, 'certificate-authority'), undefined];
  const u = user as { certFile?: string; certData?: string; keyFile?: string; keyData?: string } | null;
  if (u?.certFile) [u.certData, u.certFile] = [read(u.certFile, 'client-certificate'), undefined];
  if (u?.keyFile) [u.keyData, u.keyFile] = [read(u.keyFile, 'client-key'), undefined];
  const tokenFile = user?.authProvider?.config?.tokenFile;
  if (typeof tokenFile === 'string') read(tokenFile, 'token file');
}

/** A plugin's kubeconfig `env:` by its command line, handed to that plugin's process only. */
const pluginEnvs = new Map<string, Record<string, string>>();
const pluginKey = (command: string, args: readonly string[] | undefined) => [command, ...(args ?? [])].join('\0');

/**
 * The library writes an exec plugin's `env:` into this process's own environment before it starts the plugin, so
 * a kubeconfig could set AWS_ENDPOINT_URL_S3 or HTTPS_PROXY for everything cni-rewind does after (a whole bundle
 * went to another endpoint). The entries are taken out of the user's config and given to the plugin's process alone.
 */
function keepExecEnvToThePlugin(kc: KubeConfig, user: User | null): void {
  const u = user as (User & { exec?: { command?: string; args?: string[]; env?: unknown } }) | null;
  const exec = u?.exec ?? u?.authProvider?.config?.exec;
  if (!exec?.command || !Array.isArray(exec.env)) return;
  const env: Record<string, string> = {};
  for (const e of exec.env as { name?: unknown; value?: unknown }[]) if (typeof e?.name === 'string') env[e.name] = String(e.value ?? '');
  pluginEnvs.set(pluginKey(exec.command, exec.args), env);
  delete exec.env;
  const authenticator = libraryAuthenticators(kc).exec as unknown as { execFn?: (c: string, a: readonly string[], o?: SpawnOptions) => unknown } | undefined;
  if (authenticator)
    authenticator.execFn = (command: string, args: readonly string[], options: SpawnOptions = {}) =>
      spawn(command, args, { ...options, env: { ...process.env, ...options.env, ...pluginEnvs.get(pluginKey(command, args)) } });
}

/** What the library's authenticators keep between calls (they are not exported, so they are found by shape). */
interface LibraryAuthenticators {
  exec?: { tokenCache: Record<string, { status?: { expirationTimestamp?: string } } | null> };
  oidc?: LibraryOidcAuthenticator;
  file?: { lastRead: Date | null };
}

/** Credentials of the current user, fetched through the library's authenticators and cached until shortly before they expire. */
class Credentials {
  private cached?: { headers: Record<string, string | string[]>; refreshAt: number };
  private inflight?: Promise<Record<string, string | string[]>>;
  private readonly kind: 'exec' | 'oidc' | 'file' | 'static';

  constructor(
    private readonly kc: KubeConfig,
    private readonly user: User | null,
    private readonly opts: ConnectionOptions,
    first: https.RequestOptions,
  ) {
    const u = user as (User & { exec?: unknown }) | null;
    this.kind =
      u?.exec || u?.authProvider?.name === 'exec' || u?.authProvider?.config?.exec
        ? 'exec'
        : u?.authProvider?.name === 'oidc'
          ? 'oidc'
          : u?.authProvider?.config?.tokenFile
            ? 'file'
            : 'static';
    this.cached = { headers: this.withImpersonation(first.headers), refreshAt: this.refreshAt(Date.now()) };
  }

  async headers(): Promise<Record<string, string | string[]>> {
    if (this.cached && Date.now() < this.cached.refreshAt) return this.cached.headers;
    this.inflight ??= this.load(false).finally(() => (this.inflight = undefined));
    return this.inflight;
  }

  async refresh(): Promise<boolean> {
    if (this.kind === 'static') return false;
    this.inflight ??= this.load(true).finally(() => (this.inflight = undefined));
    await this.inflight;
    return true;
  }

  private async load(force: boolean): Promise<Record<string, string | string[]>> {
    // Early refresh or a 401: make the library fetch anew instead of handing back its cached credential.
    this.expireLibraryCache(force || !!this.cached);
    const o: https.RequestOptions = {};
    try {
      await this.kc.applyToHTTPSOptions(o);
    } catch (err) {
      throw new EnvironmentError(`cannot refresh the credentials of user "${this.user?.name ?? '?'}": ${firstLine(errorMessage(err))}`, { cause: err });
    }
    const now = Date.now();
    this.cached = { headers: this.withImpersonation(o.headers), refreshAt: this.refreshAt(now) };
    return this.cached.headers;
  }

  private withImpersonation(h: https.RequestOptions['headers']): Record<string, string | string[]> {
    const out: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(h ?? {})) if (v !== undefined) out[k] = Array.isArray(v) ? v : String(v);
    if (this.opts.as) out['Impersonate-User'] = this.opts.as;
    if (this.opts.asGroups?.length) out['Impersonate-Group'] = this.opts.asGroups;
    return out;
  }

  /** When to fetch again: a fifth of the remaining lifetime (at most a minute) before expiry. */
  private refreshAt(now: number): number {
    const expiry = this.expiry();
    if (expiry === undefined) return this.kind === 'file' ? now + 60_000 : Infinity;
    const margin = Math.min(60_000, Math.max(0, expiry - now) / 5);
    return expiry - margin;
  }

  private expiry(): number | undefined {
    const a = libraryAuthenticators(this.kc);
    if (this.kind === 'exec') {
      const ts = a.exec?.tokenCache[this.user!.name]?.status?.expirationTimestamp;
      const t = ts ? Date.parse(ts) : NaN;
      return Number.isFinite(t) ? t : undefined;
    }
    if (this.kind === 'oidc') {
      const exp = jwtExpiry(this.user!.authProvider?.config?.['id-token']);
      return exp === undefined ? undefined : exp * 1000;
    }
    return undefined;
  }

  private expireLibraryCache(really: boolean): void {
    if (!really || !this.user) return;
    const a = libraryAuthenticators(this.kc);
    if (this.kind === 'exec' && a.exec) a.exec.tokenCache[this.user.name] = null;
    // 0 means "read the expiry from the token" to the library; 1 is a time long past, so it refreshes.
    if (this.kind === 'oidc' && a.oidc) a.oidc.currentTokenExpiration = 1;
    if (this.kind === 'file' && a.file) a.file.lastRead = null;
  }
}

function libraryAuthenticators(kc: KubeConfig): LibraryAuthenticators {
  const list = ((kc.constructor as unknown as { authenticators?: object[] }).authenticators ?? []) as any[];
  return {
    exec: list.find((a) => a && typeof a === 'object' && 'tokenCache' in a),
    oidc: list.find((a) => a && typeof a === 'object' && 'currentTokenExpiration' in a),
    file: list.find((a) => a && typeof a === 'object' && 'lastRead' in a),
  };
}

function jwtExpiry(token: unknown): number | undefined {
  if (typeof token !== 'string') return undefined;
  try {
    const payload = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8'));
    return typeof payload.exp === 'number' ? payload.exp : undefined;
  } catch {
    return undefined;
  }
}

function firstLine(s: string): string {
  return s.split('\n')[0] ?? s;
}
