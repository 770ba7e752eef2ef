import http from 'node:http';
import { EnvironmentError } from '../core/errors.js';
import { connect, type Connection, type ConnectionOptions } from './connection.js';
import { defaultRetryPolicy, withRetry, type RetryPolicy } from '../util/retry.js';
import { openTransport, type Transport, type TransportResponse } from './transport.js';
import { resourcePath, type KubeList, type KubeObject, type ResourceType } from './types.js';

/** An error the API server answered with (a Status object). */
export class KubeApiError extends Error {
  constructor(
    readonly statusCode: number,
    readonly reason: string,
    message: string,
    readonly method: string,
    readonly path: string,
    readonly details?: unknown,
    /** Who the request was made as (kubeconfig user or --as), for 401/403 messages. */
    readonly user?: string,
  ) {
    super(message);
    this.name = 'KubeApiError';
  }
  get notFound(): boolean {
    return this.statusCode === 404;
  }
  get conflict(): boolean {
    return this.statusCode === 409;
  }
}

/** The API server could not be reached at all (connection refused, reset, timeout). */
export class KubeConnectionError extends EnvironmentError {
  constructor(
    message: string,
    readonly code?: string,
    cause?: unknown,
  ) {
    super(message, { cause, hint: 'check that the cluster is running and --kubeconfig/--context point at it' });
  }
}

export interface RequestOptions {
  body?: unknown;
  contentType?: string;
  /** Another representation than plain JSON (e.g. metadata only: `PARTIAL_METADATA_LIST`). */
  accept?: string;
  query?: Record<string, string | number | boolean | undefined>;
  /** Override the retry policy; `false` disables retries. */
  retry?: RetryPolicy | false;
  timeoutMs?: number;
}

export interface ClientStats {
  requests: number;
  retries: number;
  throttled: number; // HTTP 429 answers
}

const PARTIAL_METADATA_LIST = 'application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io';

const TRANSIENT_NET = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EAI_AGAIN', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_SOCKET']);
/**
 * Errors that mean "nothing answers at that address": retried only once the server has answered this process
 * (an API server restarting during a run), not on the first contact (a wrong context or a stopped cluster
 * should fail in seconds, not after a minute of silent retries).
 */
const UNREACHABLE_NET = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);

/**
 * The one module through which cni-rewind talks to Kubernetes: raw REST (over HTTP/2 where it can, `transport.ts`),
 * with retries and backoff for throttling and a restarting API server, paging, server-side apply and waits.
 * Objects stay plain JSON: no per-kind classes, so any CRD (including ones a future Calico adds) works.
 */
export class KubeClient {
  readonly stats: ClientStats = { requests: 0, retries: 0, throttled: 0 };
  private readonly url: URL;
  /** Set once the API server has answered: from then on, connection refused is an outage worth waiting out. */
  private reached = false;
  onRetry?: (info: { method: string; path: string; attempt: number; delayMs: number; reason: string }) => void;

  private constructor(
    readonly connection: Connection,
    readonly retryPolicy: RetryPolicy,
    private readonly transport: Transport,
    /** Per-request timeout (--request-timeout); 0 = none. */
    private readonly requestTimeoutMs: number,
  ) {
    this.url = new URL(connection.server);
  }

  static async connect(opts: ConnectionOptions & { retry?: Partial<RetryPolicy>; requestTimeoutMs?: number } = {}): Promise<KubeClient> {
    const conn = await connect(opts);
    const url = new URL(conn.server);
    const transport = await openTransport(url, conn.proxy, conn.tls);
    return new KubeClient(conn, { ...defaultRetryPolicy, ...opts.retry }, transport, opts.requestTimeoutMs ?? 60_000);
  }

  close(): void {
    this.transport.close();
  }

  // ---------- raw requests ----------

  async request<T = any>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    try {
      return await this.requestWithRetries<T>(method, path, opts);
    } catch (err) {
      // Expired or revoked credentials: fetch new ones (exec plugin, OIDC, token file) and try once more.
      if (err instanceof KubeApiError && err.statusCode === 401 && (await this.connection.refreshCredentials())) {
        this.onRetry?.({ method, path, attempt: 0, delayMs: 0, reason: 'HTTP 401: credentials refreshed' });
        return this.requestWithRetries<T>(method, path, opts);
      }
      throw err;
    }
  }

  private requestWithRetries<T>(method: string, path: string, opts: RequestOptions): Promise<T> {
    const policy = opts.retry === false ? { ...this.retryPolicy, maxElapsedMs: 0 } : (opts.retry ?? this.retryPolicy);
    return withRetry(
      () => this.once<T>(method, path, opts),
      (err) => this.retryable(err),
      policy,
      (err, attempt, delayMs) => {
        this.stats.retries++;
        this.onRetry?.({ method, path, attempt, delayMs, reason: err instanceof Error ? err.message : String(err) });
      },
    );
  }

  private retryable(err: unknown): { retry: boolean; afterMs?: number } {
    if (err instanceof KubeApiError) {
      if (err.statusCode === 429) return { retry: true, afterMs: (err.details as any)?.retryAfterMs };
      // 500 is retried too: a restarting apiserver answers "etcdserver: leader changed" and similar.
      if ([500, 502, 503, 504].includes(err.statusCode)) return { retry: true, afterMs: (err.details as any)?.retryAfterMs };
      return { retry: false };
    }
    if (err instanceof KubeConnectionError) return { retry: this.reached || !UNREACHABLE_NET.has(err.code ?? '') };
    return { retry: false };
  }

  private async once<T>(method: string, path: string, opts: RequestOptions): Promise<T> {
    this.stats.requests++;
    const auth = await this.connection.authHeaders();
    const qs = opts.query
      ? Object.entries(opts.query)
          .filter(([, v]) => v !== undefined && v !== '')
          .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
          .join('&')
      : '';
    const fullPath = `${this.url.pathname.replace(/\/$/, '')}${path}${qs ? (path.includes('?') ? '&' : '?') + qs : ''}`;
    const body = opts.body === undefined ? undefined : typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
    const headers: Record<string, string | number | string[]> = {
      ...auth,
      Accept: opts.accept ?? 'application/json',
      'User-Agent': 'cni-rewind',
    };
    if (body !== undefined) {
      headers['Content-Type'] = opts.contentType ?? 'application/json';
      headers['Content-Length'] = Buffer.byteLength(body);
    }
    let res: TransportResponse;
    try {
      res = await this.transport.send({ method, path: fullPath, headers, body, timeoutMs: opts.timeoutMs ?? (this.requestTimeoutMs || undefined) });
    } catch (e) {
      throw netError(e as Error, method, path);
    }
    this.reached = true;
    const text = res.body.toString('utf8');
    const status = res.status;
    if (status >= 200 && status < 300) {
      try {
        return (text ? JSON.parse(text) : undefined) as T;
      } catch {
        // The body is whole: both transports fail a body cut off mid-way as a reset connection (retried) before it
        // gets here (transport.ts). What is left is an answer that is not the Kubernetes API's (a proxy's login page),
        // which asking again would not change.
        const type = res.headers['content-type'];
        throw new KubeApiError(
          status,
          'BadResponse',
          `unparseable response from ${method} ${path} (HTTP ${status}${type ? `, ${String(type)}` : ''}): the server answered something that is not the Kubernetes API`,
          method,
          path,
        );
      }
    }
    if (status === 429) this.stats.throttled++;
    let parsed: any;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    const retryAfter = Number(res.headers['retry-after']);
    const details = {
      ...(parsed?.details ?? {}),
      retryAfterMs: Number.isFinite(retryAfter) ? retryAfter * 1000 : undefined,
      causes: parsed?.details?.causes,
    };
    throw new KubeApiError(
      status,
      parsed?.reason ?? httpReason(status),
      parsed?.message ?? `${method} ${path}: HTTP ${status}`,
      method,
      path,
      details,
      this.connection.userName,
    );
  }

  // ---------- objects ----------

  async get<T = KubeObject>(r: ResourceType, namespace: string | undefined, name: string): Promise<T> {
    return this.request<T>('GET', resourcePath(r, namespace, name));
  }

  /** GET that returns undefined for 404. */
  async getOrUndefined<T = KubeObject>(r: ResourceType, namespace: string | undefined, name: string): Promise<T | undefined> {
    try {
      return await this.get<T>(r, namespace, name);
    } catch (err) {
      if (err instanceof KubeApiError && err.notFound) return undefined;
      throw err;
    }
  }

  /**
   * List a resource page by page (`limit`/`continue`), so memory stays flat however many objects there are.
   * If a continue token expires (410) mid-way, the error propagates: a partial list must not pass for a full one.
   */
  async *listPages<T = KubeObject>(
    r: ResourceType,
    opts: { namespace?: string; limit?: number; labelSelector?: string; fieldSelector?: string } = {},
  ): AsyncGenerator<KubeList<T>> {
    let cont: string | undefined;
    do {
      const page: KubeList<T> = await this.request('GET', resourcePath(r, opts.namespace), {
        query: { limit: opts.limit ?? 500, continue: cont, labelSelector: opts.labelSelector, fieldSelector: opts.fieldSelector },
      });
      yield page;
      cont = page.metadata?.continue || undefined;
    } while (cont);
  }

  async *listItems<T = KubeObject>(
    r: ResourceType,
    opts: { namespace?: string; limit?: number; labelSelector?: string; fieldSelector?: string } = {},
  ): AsyncGenerator<T> {
    for await (const page of this.listPages<T>(r, opts)) {
      const apiVersion = r.group ? `${r.group}/${r.version}` : r.version;
      for (const item of page.items) {
        // Items in a list omit apiVersion/kind; put them back so every object stands alone.
        const obj = item as any;
        obj.apiVersion ??= apiVersion;
        obj.kind ??= r.kind;
        yield item;
      }
    }
  }

  async listAll<T = KubeObject>(r: ResourceType, opts: { namespace?: string; labelSelector?: string; fieldSelector?: string } = {}): Promise<T[]> {
    const out: T[] = [];
    for await (const item of this.listItems<T>(r, opts)) out.push(item);
    return out;
  }

  /**
   * Names, labels and annotations only (the API server's PartialObjectMetadataList, as `kubectl get` asks for):
   * for a question about which objects exist, without their specs (all CRDs' schemas are megabytes).
   */
  async listMetadata(r: ResourceType, opts: { labelSelector?: string } = {}): Promise<Pick<KubeObject, 'metadata'>[]> {
    const out: Pick<KubeObject, 'metadata'>[] = [];
    let cont: string | undefined;
    do {
      const page: KubeList<Pick<KubeObject, 'metadata'>> = await this.request('GET', resourcePath(r), {
        accept: PARTIAL_METADATA_LIST,
        query: { limit: 500, continue: cont, labelSelector: opts.labelSelector },
      });
      // A PartialObjectMetadataList with nothing in it comes as `items: null` (a cluster without any CRD).
      out.push(...(page.items ?? []));
      cont = page.metadata?.continue || undefined;
    } while (cont);
    return out;
  }

  async create<T = KubeObject>(r: ResourceType, obj: KubeObject, opts: { dryRun?: boolean; fieldValidation?: 'Strict' | 'Warn' | 'Ignore' } = {}): Promise<T> {
    return this.request<T>('POST', resourcePath(r, obj.metadata.namespace), {
      body: obj,
      query: { dryRun: opts.dryRun ? 'All' : undefined, fieldValidation: opts.fieldValidation },
    });
  }

  async replace<T = KubeObject>(r: ResourceType, obj: KubeObject, opts: { dryRun?: boolean; fieldValidation?: 'Strict' | 'Warn' | 'Ignore' } = {}): Promise<T> {
    return this.request<T>('PUT', resourcePath(r, obj.metadata.namespace, obj.metadata.name), {
      body: obj,
      query: { dryRun: opts.dryRun ? 'All' : undefined, fieldValidation: opts.fieldValidation },
    });
  }

  /** Server-side apply (`kubectl apply --server-side`), conflicts forced unless told otherwise. */
  async apply<T = KubeObject>(
    r: ResourceType,
    obj: KubeObject,
    opts: { fieldManager?: string; force?: boolean; dryRun?: boolean; fieldValidation?: 'Strict' | 'Warn' | 'Ignore'; subresource?: 'status' } = {},
  ): Promise<T> {
    const p = resourcePath(r, obj.metadata.namespace, obj.metadata.name) + (opts.subresource ? `/${opts.subresource}` : '');
    return this.request<T>('PATCH', p, {
      body: obj,
      contentType: 'application/apply-patch+yaml',
      query: {
        fieldManager: opts.fieldManager ?? 'cni-rewind',
        force: opts.force ?? true,
        dryRun: opts.dryRun ? 'All' : undefined,
        fieldValidation: opts.fieldValidation,
      },
    });
  }

  async mergePatch<T = KubeObject>(
    r: ResourceType,
    namespace: string | undefined,
    name: string,
    patch: unknown,
    opts: { subresource?: 'status' | 'scale' } = {},
  ): Promise<T> {
    const p = resourcePath(r, namespace, name) + (opts.subresource ? `/${opts.subresource}` : '');
    return this.request<T>('PATCH', p, { body: patch, contentType: 'application/merge-patch+json' });
  }

  async delete(
    r: ResourceType,
    namespace: string | undefined,
    name: string,
    opts: {
      propagationPolicy?: 'Foreground' | 'Background' | 'Orphan';
      gracePeriodSeconds?: number;
      /** Delete only this version of the object: a write since it was read answers 409 Conflict. */
      preconditions?: { uid?: string; resourceVersion?: string };
    } = {},
  ): Promise<boolean> {
    try {
      await this.request('DELETE', resourcePath(r, namespace, name), {
        body: {
          kind: 'DeleteOptions',
          apiVersion: 'v1',
          propagationPolicy: opts.propagationPolicy,
          gracePeriodSeconds: opts.gracePeriodSeconds,
          preconditions: opts.preconditions,
        },
      });
      return true;
    } catch (err) {
      if (err instanceof KubeApiError && err.notFound) return false;
      throw err;
    }
  }

  async serverVersion(): Promise<{ gitVersion: string; major: string; minor: string; platform?: string }> {
    return this.request('GET', '/version');
  }

  /** Poll until `check` returns a value (not undefined), or fail after `timeoutMs`. */
  /** Polls `check` until it returns a value. A timeout names the wait, its length and, from `state` (read once,
   * then), what held it, so the message alone says why. */
  async waitFor<T>(
    what: string,
    check: () => Promise<T | undefined>,
    opts: { timeoutMs?: number; intervalMs?: number; state?: () => Promise<string> } = {},
  ): Promise<T> {
    const started = Date.now();
    const deadline = started + (opts.timeoutMs ?? 60_000);
    const interval = opts.intervalMs ?? 500;
    for (;;) {
      const v = await check();
      if (v !== undefined) return v;
      if (Date.now() > deadline) {
        const state = opts.state ? await opts.state().catch((e: Error) => `(state unreadable: ${e.message})`) : '';
        throw new EnvironmentError(`timed out after ${Math.round((Date.now() - started) / 1000)} s waiting for ${what}${state ? `: ${state}` : ''}`);
      }
      await new Promise((r) => setTimeout(r, interval));
    }
  }
}

function netError(e: Error & { code?: string }, method: string, path: string): Error {
  if (e.code && (TRANSIENT_NET.has(e.code) || e.message === 'socket hang up')) {
    return new KubeConnectionError(`cannot reach the Kubernetes API server (${e.code}) on ${method} ${path}`, e.code, e);
  }
  if (e.message === 'socket hang up') return new KubeConnectionError(`connection to the Kubernetes API server closed on ${method} ${path}`, 'ECONNRESET', e);
  if (e.code?.startsWith('ERR_TLS') || e.code?.includes('CERT') || e.code === 'DEPTH_ZERO_SELF_SIGNED_CERT') {
    return new EnvironmentError(`TLS error talking to the Kubernetes API server: ${e.message}`, { cause: e });
  }
  return new KubeConnectionError(`request ${method} ${path} failed: ${e.message}`, e.code, e);
}

function httpReason(status: number): string {
  return http.STATUS_CODES[status]?.replace(/\s+/g, '') ?? `HTTP${status}`;
}
