/**
 * Proxmox VE REST client (`https://HOST:8006/api2/json`): API-token auth (`Authorization: PVEAPIToken=
 * USER@REALM!TOKENID=SECRET`, no ticket or CSRF token needed), form-encoded bodies, `{data: ...}` answers,
 * and task (UPID) following: every write call returns a UPID that is polled on the node named inside it until
 * `status == 'stopped'`; `exitstatus == 'OK'` is success, anything else is the task's error.
 */
import {
  BadInputError,
  defaultRetryPolicy,
  EnvironmentError,
  HttpClient,
  isTransient,
  registerSecret,
  type RetryPolicy,
  type TlsOptions,
  withRetry,
} from '../../src/provider-kit/index.js';

export class ProxmoxApiError extends EnvironmentError {
  constructor(
    message: string,
    readonly status: number,
    hint?: string,
  ) {
    super(message, { hint });
  }
}

export class ProxmoxTaskError extends EnvironmentError {
  constructor(
    message: string,
    readonly upid: string,
    readonly exitStatus: string,
  ) {
    super(message);
  }
}

/** UPID:node:pid(8 hex):pstart:starttime(8 hex):type:id:user: (pve-common src/PVE/UPID.pm). */
export function parseUpid(upid: string): { node: string; type: string; id: string; user: string } | undefined {
  const m = /^UPID:([a-zA-Z0-9_.-]+):[0-9A-Fa-f]{8}:[0-9A-Fa-f]{8,9}:[0-9A-Fa-f]{8}:([^:\s]+):([^:\s]*):([^:\s]+):$/.exec(upid);
  return m ? { node: m[1]!, type: m[2]!, id: m[3]!, user: m[4]! } : undefined;
}

const TOKEN_RE = /^[^@\s!=]+@[^!\s=]+![A-Za-z][A-Za-z0-9._-]*=\S+$/;

export interface ProxmoxConnection {
  url: URL;
  /** `USER@REALM!TOKENID=SECRET`. */
  token: string;
  tls: TlsOptions;
}

export class ProxmoxApi {
  private readonly http: HttpClient;
  private readonly auth: string;

  constructor(
    private readonly conn: ProxmoxConnection,
    private readonly pollIntervalMs = 1_000,
    private readonly retry: RetryPolicy = { ...defaultRetryPolicy, maxElapsedMs: 60_000 },
  ) {
    if (!TOKEN_RE.test(conn.token)) {
      throw new BadInputError('proxmox: the API token is not of the form USER@REALM!TOKENID=SECRET', {
        hint: 'Set PROXMOX_VE_API_TOKEN (e.g. cni-rewind@pve!backup=<uuid>) or providers.proxmox.tokenFile.',
      });
    }
    registerSecret(conn.token);
    registerSecret(conn.token.slice(conn.token.indexOf('=') + 1));
    this.auth = `PVEAPIToken=${conn.token}`;
    registerSecret(this.auth);
    this.http = new HttpClient('Proxmox VE', conn.url, conn.tls);
  }

  get host(): string {
    return this.conn.url.host;
  }

  /**
   * Transient failures are retried with backoff within a bounded budget: any request that never reached the
   * server, and GETs whose connection was cut or that got 502/503/504 (a POST could have created a snapshot).
   */
  private call<T>(method: 'GET' | 'POST' | 'DELETE', path: string, params?: Record<string, string | number | boolean | undefined>): Promise<T> {
    return withRetry(
      () => this.callOnce<T>(method, path, params),
      (err) => ({ retry: isTransient(err, method === 'GET') }),
      this.retry,
    );
  }

  private async callOnce<T>(method: 'GET' | 'POST' | 'DELETE', path: string, params?: Record<string, string | number | boolean | undefined>): Promise<T> {
    const form = new URLSearchParams();
    for (const [k, v] of Object.entries(params ?? {})) if (v !== undefined) form.set(k, typeof v === 'boolean' ? (v ? '1' : '0') : String(v));
    const query = method !== 'POST' && [...form.keys()].length ? `?${form}` : '';
    const full = `/api2/json${path}${query}`;
    const res = await this.http.request(method, full, {
      headers: { authorization: this.auth, accept: 'application/json', ...(method === 'POST' ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
      body: method === 'POST' ? form.toString() : undefined,
    });
    let body: { data?: unknown; errors?: Record<string, string>; message?: string } = {};
    try {
      body = res.body ? JSON.parse(res.body) : {};
    } catch {
      /* not JSON: the reason phrase below says what happened */
    }
    if (res.status === 401)
      throw new ProxmoxApiError(
        `Proxmox VE at ${this.host} rejected the API token (HTTP 401 ${res.statusMessage})`,
        401,
        'Check that PROXMOX_VE_API_TOKEN names an existing, unexpired token (format USER@REALM!TOKENID=SECRET).',
      );
    if (res.status === 403)
      throw new ProxmoxApiError(
        `Proxmox VE at ${this.host}: permission denied for ${method} ${path} (${res.statusMessage})`,
        403,
        'The token needs VM.Audit, VM.Snapshot (and VM.Snapshot.Rollback, VM.PowerMgmt) on the VMs; privilege-separated tokens need their own ACLs.',
      );
    if (res.status >= 400) {
      const fields = body.errors
        ? ` (${Object.entries(body.errors)
            .map(([k, v]) => `${k}: ${v}`)
            .join('; ')})`
        : '';
      throw new ProxmoxApiError(`Proxmox VE ${method} ${path} failed: HTTP ${res.status} ${body.message ?? res.statusMessage}${fields}`.trim(), res.status);
    }
    return body.data as T;
  }

  get<T>(path: string, params?: Record<string, string | number | boolean | undefined>): Promise<T> {
    return this.call<T>('GET', path, params);
  }
  post<T>(path: string, params?: Record<string, string | number | boolean | undefined>): Promise<T> {
    return this.call<T>('POST', path, params);
  }
  delete<T>(path: string, params?: Record<string, string | number | boolean | undefined>): Promise<T> {
    return this.call<T>('DELETE', path, params);
  }

  /** Follow a task to its end; throws ProxmoxTaskError with the exit status (and the log's last line) when it fails. */
  async waitTask(upid: string, what: string, opts: { timeoutMs: number; onProgress?: (status: string) => void }): Promise<void> {
    const info = parseUpid(upid);
    if (!info) throw new EnvironmentError(`Proxmox VE answered ${what} with something that is not a task id: ${upid.slice(0, 80)}`);
    const base = `/nodes/${encodeURIComponent(info.node)}/tasks/${encodeURIComponent(upid)}`;
    const deadline = Date.now() + opts.timeoutMs;
    for (;;) {
      const st = await this.get<{ status: string; exitstatus?: string }>(`${base}/status`);
      if (st?.status === 'stopped') {
        if (st.exitstatus === 'OK') return;
        let last = '';
        try {
          const log = await this.get<{ n: number; t: string }[]>(`${base}/log`, { start: 0, limit: 500 });
          last = log?.filter((l) => l.t && l.t !== 'TASK OK' && !l.t.startsWith('TASK ERROR')).pop()?.t ?? '';
        } catch {
          /* the status already says why */
        }
        throw new ProxmoxTaskError(
          `Proxmox VE task ${info.type} (${what}) failed: ${st.exitstatus ?? 'no exit status'}${last && !String(st.exitstatus).includes(last) ? ` (log: ${last})` : ''}`,
          upid,
          st.exitstatus ?? '',
        );
      }
      opts.onProgress?.(st?.status ?? 'unknown');
      if (Date.now() > deadline)
        throw new EnvironmentError(`Proxmox VE task ${info.type} (${what}) still ${st?.status} after ${Math.round(opts.timeoutMs / 1000)} s: ${upid}`);
      await new Promise((r) => setTimeout(r, this.pollIntervalMs));
    }
  }

  close(): void {
    this.http.close();
  }
}
