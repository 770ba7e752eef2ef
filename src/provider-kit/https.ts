/**
 * One HTTP(S) request with the TLS choices hypervisor APIs need: verification on by default, an extra CA
 * (self-signed Proxmox/vCenter certificates), or an explicit insecure flag. node:https rather than fetch,
 * because fetch cannot take a per-request CA without an extra dependency. Used by the Proxmox and vSphere providers.
 * HTTPS_PROXY / NO_PROXY are honoured (src/provider-kit/proxy.ts).
 */
import http from 'node:http';
import https from 'node:https';
import tls from 'node:tls';
import { readFileSync } from 'node:fs';
import { BadInputError, EnvironmentError } from '../core/errors.js';
import { envProxyAgent } from './proxy.js';

export interface TlsOptions {
  /** PEM file with the CA (or the self-signed certificate) to trust in addition to the system CAs. */
  caFile?: string;
  /** Skip certificate verification. Only when asked for explicitly. */
  insecure?: boolean;
}

export interface HttpResponse {
  status: number;
  /** The reason phrase: Proxmox VE puts its error text there. */
  statusMessage: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

const NOT_SENT = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);
const CUT = new Set(['ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ESOCKETTIMEDOUT']);

/**
 * Whether a failed request may be sent again: it never reached the server (connection refused, unreachable), or
 * it is idempotent and the connection was cut or the server answered 502/503/504.
 */
export function isTransient(err: unknown, idempotent: boolean): boolean {
  const e = err as { cause?: { code?: string }; status?: number };
  const code = e?.cause?.code;
  if (code && NOT_SENT.has(code)) return true;
  if (!idempotent) return false;
  return (
    (!!code && CUT.has(code)) ||
    e?.status === 502 ||
    e?.status === 503 ||
    e?.status === 504 ||
    /no answer within/.test(String((e?.cause as Error | undefined)?.message))
  );
}

export class HttpClient {
  private readonly agent: http.Agent;
  constructor(
    /** For error messages: "Proxmox VE", "vSphere". */
    private readonly what: string,
    private readonly base: URL,
    tlsOpts: TlsOptions,
    private readonly timeoutMs = 60_000,
  ) {
    if (base.protocol === 'https:') {
      let ca: Buffer | undefined;
      if (tlsOpts.caFile) {
        try {
          ca = readFileSync(tlsOpts.caFile);
        } catch (err) {
          throw new BadInputError(`${what}: cannot read the CA file ${tlsOpts.caFile}: ${(err as Error).message}`);
        }
      }
      // An explicit CA is added to (not instead of) the system roots, so a public certificate keeps working.
      const tlsAgentOpts = { rejectUnauthorized: !tlsOpts.insecure, ...(ca ? { ca: [...tls.rootCertificates, ca] } : {}) };
      this.agent = envProxyAgent(tlsAgentOpts) ?? new https.Agent({ keepAlive: true, ...tlsAgentOpts });
    } else if (base.protocol === 'http:') {
      this.agent = envProxyAgent() ?? new http.Agent({ keepAlive: true });
    } else {
      throw new BadInputError(`${what}: URL must start with https:// (or http://), not ${base.protocol}`);
    }
  }

  request(method: string, pathAndQuery: string, opts: { headers?: Record<string, string>; body?: string } = {}): Promise<HttpResponse> {
    const url = new URL(pathAndQuery, this.base);
    const mod = url.protocol === 'https:' ? https : http;
    return new Promise((resolve, reject) => {
      const req = mod.request(
        url,
        {
          method,
          agent: this.agent,
          timeout: this.timeoutMs,
          headers: { ...(opts.body !== undefined ? { 'content-length': Buffer.byteLength(opts.body).toString() } : {}), ...opts.headers },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              statusMessage: res.statusMessage ?? '',
              headers: res.headers,
              body: Buffer.concat(chunks).toString('utf8'),
            }),
          );
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`no answer within ${this.timeoutMs} ms`)));
      req.on('error', (err: NodeJS.ErrnoException) => {
        const tlsHint = /certificate|self[- ]signed|CERT_|unable to verify/i.test(`${err.code} ${err.message}`)
          ? "Give the server's CA with the provider's caFile option, or (not recommended) set insecure: true."
          : undefined;
        reject(new EnvironmentError(`${this.what} at ${this.base.host} is unreachable: ${err.message}`, { hint: tlsHint, cause: err }));
      });
      if (opts.body !== undefined) req.write(opts.body);
      req.end();
    });
  }

  close(): void {
    this.agent.destroy();
  }
}
