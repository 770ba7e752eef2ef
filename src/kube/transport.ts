import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { makeAgent } from '../net/proxy.js';

/** One request as the client sends it: the path has its query string, the headers their auth. */
export interface TransportRequest {
  method: string;
  path: string;
  headers: Record<string, string | number | string[]>;
  body?: string;
  timeoutMs?: number;
}

export interface TransportResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/**
 * How requests reach the API server. Errors are Node's network errors (with `code`); an HTTP status, whatever it
 * is, is a response.
 */
export interface Transport {
  send(req: TransportRequest): Promise<TransportResponse>;
  close(): void;
  /** 'h2' once requests go over one HTTP/2 connection, 'http/1.1' otherwise (for tests and benchmarks). */
  readonly protocol: 'h2' | 'http/1.1' | 'not connected';
}

/**
 * HTTP/2 when the server offers it and no proxy is in the way, as kubectl and client-go do: a command's requests
 * share one TLS connection. Over HTTP/1.1 each request running at the same time needs its own connection, and the
 * TLS handshakes (client certificate signed, server chain checked, each time) were most of a short command's time
 * talking to the cluster (`status`: 8 requests at once, 8 handshakes; docs/BENCHMARKS.md, start-up). Through a
 * proxy, or to a server that does not offer h2, requests go over a keep-alive HTTP/1.1 agent as before.
 */
export async function openTransport(server: URL, proxy: string | undefined, tlsOptions: https.AgentOptions): Promise<Transport> {
  const http1 = async () => new Http1Transport(server, await makeAgent(server, proxy, { keepAlive: true, maxSockets: 16, ...tlsOptions }));
  if (server.protocol !== 'https:' || proxy) return http1();
  return new Http2Transport(server, tlsOptions, http1);
}

/** Requests over a keep-alive agent: up to 16 connections at once. */
class Http1Transport implements Transport {
  readonly protocol = 'http/1.1';
  constructor(
    private readonly server: URL,
    private readonly agent: http.Agent,
  ) {}

  send(r: TransportRequest): Promise<TransportResponse> {
    const secure = this.server.protocol === 'https:';
    return new Promise((resolve, reject) => {
      const req = (secure ? https : http).request(
        {
          protocol: this.server.protocol,
          hostname: this.server.hostname,
          port: this.server.port || (secure ? 443 : 80),
          method: r.method,
          path: r.path,
          headers: r.headers,
          agent: this.agent,
          timeout: r.timeoutMs,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
        },
      );
      req.on('timeout', () => req.destroy(Object.assign(new Error('request timed out'), { code: 'ETIMEDOUT' })));
      req.on('error', reject);
      if (r.body !== undefined) req.write(r.body);
      req.end();
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/**
 * Receive windows as client-go sets them (4 MiB a stream, far more for the connection): with HTTP/2's default of
 * 64 KiB, a page of 500 CRDs (megabytes) would come in 64 KiB steps, one round trip each.
 */
const STREAM_WINDOW = 4 * 1024 * 1024;
const CONNECTION_WINDOW = 64 * 1024 * 1024;

/** Requests as streams of one HTTP/2 session, opened at the first request and again after the server closed it. */
class Http2Transport implements Transport {
  private session?: http2.ClientHttp2Session;
  private connecting?: Promise<http2.ClientHttp2Session | undefined>;
  /** Set when the server chose HTTP/1.1: from then on every request goes there. */
  private fallback?: Transport;
  /**
   * Streams in flight, per session: a session that went away can still finish its streams while the next one carries
   * new requests, and each must stay referenced while a stream of its own is open.
   */
  private readonly active = new WeakMap<http2.ClientHttp2Session, number>();
  private closed = false;

  constructor(
    private readonly server: URL,
    private readonly tlsOptions: https.AgentOptions,
    private readonly openHttp1: () => Promise<Transport>,
  ) {}

  get protocol(): Transport['protocol'] {
    return this.fallback ? 'http/1.1' : this.session ? 'h2' : 'not connected';
  }

  async send(r: TransportRequest): Promise<TransportResponse> {
    const session = this.fallback ? undefined : (this.session ?? (await (this.connecting ??= this.connect(r.timeoutMs))));
    if (!session) return this.fallback!.send(r);
    return this.stream(session, r);
  }

  close(): void {
    this.closed = true;
    this.session?.close();
    this.fallback?.close();
  }

  /** One TLS connection offering h2 and http/1.1; what the server picks decides the transport for good. */
  private async connect(timeoutMs: number | undefined): Promise<http2.ClientHttp2Session | undefined> {
    try {
      const socket = await new Promise<tls.TLSSocket>((resolve, reject) => {
        const host = this.server.hostname.replace(/^\[|\]$/g, '');
        const s = tls.connect({
          ...(this.tlsOptions as tls.ConnectionOptions),
          host,
          port: Number(this.server.port || 443),
          // As Node's https agent does: a name for SNI, never an address.
          servername: this.tlsOptions.servername ?? (net.isIP(host) ? undefined : host),
          ALPNProtocols: ['h2', 'http/1.1'],
        });
        // An address that takes the connection but never answers fails within the request timeout, as over HTTP/1.1.
        if (timeoutMs) s.setTimeout(timeoutMs, () => s.destroy(Object.assign(new Error('connecting timed out'), { code: 'ETIMEDOUT' })));
        s.once('secureConnect', () => {
          s.setTimeout(0);
          resolve(s);
        });
        s.once('error', reject);
      });
      if (socket.alpnProtocol !== 'h2') {
        socket.destroy();
        this.fallback = await this.openHttp1();
        return undefined;
      }
      const session = http2.connect(this.server.origin, {
        createConnection: () => socket,
        settings: { initialWindowSize: STREAM_WINDOW },
      });
      session.setLocalWindowSize(CONNECTION_WINDOW);
      const forget = () => {
        if (this.session === session) this.session = undefined;
      };
      // A session the server ended (GOAWAY, restart) or that failed is not used again: the next request opens one.
      session.on('goaway', forget);
      session.on('close', forget);
      session.on('error', forget);
      session.unref();
      if (this.closed) session.close();
      this.session = session;
      return session;
    } finally {
      this.connecting = undefined;
    }
  }

  private stream(session: http2.ClientHttp2Session, r: TransportRequest): Promise<TransportResponse> {
    const headers: http2.OutgoingHttpHeaders = { ':method': r.method, ':path': r.path };
    for (const [k, v] of Object.entries(r.headers)) headers[k.toLowerCase()] = v;
    return new Promise((resolve, reject) => {
      // The session is unreferenced while idle, so a finished command exits without closing it; a stream in
      // flight must keep the process alive.
      const open = this.active.get(session) ?? 0;
      this.active.set(session, open + 1);
      if (open === 0) session.ref();
      let finished = false;
      const done = () => {
        if (finished) return;
        finished = true;
        const left = this.active.get(session)! - 1;
        this.active.set(session, left);
        if (left === 0) session.unref();
      };
      let req: http2.ClientHttp2Stream;
      try {
        req = session.request(headers, { endStream: r.body === undefined });
      } catch (err) {
        done();
        this.session = undefined;
        reject(resetError(err as Error));
        return;
      }
      let status = 0;
      let responseHeaders: TransportResponse['headers'] = {};
      const chunks: Buffer[] = [];
      req.on('response', (h) => {
        status = Number(h[':status']);
        responseHeaders = h as TransportResponse['headers'];
      });
      req.on('data', (c: Buffer) => chunks.push(c));
      const cutOff = () => Object.assign(new Error('the API server closed the stream before answering'), { code: 'ECONNRESET' });
      // Answered only once the stream has closed cleanly: a stream whose session died mid-body (the API server
      // killed) can still signal its end, with the body cut short.
      let ended = false;
      req.on('end', () => (ended = true));
      req.on('error', (err) => {
        done();
        reject(resetError(err));
      });
      // A session destroyed under the stream closes it without 'end' or 'error'.
      req.on('close', () => {
        if (finished) return;
        done();
        if (status && ended && req.rstCode === http2.constants.NGHTTP2_NO_ERROR) {
          resolve({ status, headers: responseHeaders, body: Buffer.concat(chunks) });
        } else reject(cutOff());
      });
      if (r.timeoutMs) req.setTimeout(r.timeoutMs, () => req.destroy(Object.assign(new Error('request timed out'), { code: 'ETIMEDOUT' })));
      if (r.body !== undefined) req.end(r.body);
    });
  }
}

/**
 * A stream ended by its session going away (the API server restarting, a GOAWAY, a reset) fails as a reset
 * connection does over HTTP/1.1, so the client's retry rules treat both alike.
 */
function resetError(err: Error & { code?: string }): Error {
  if (err.code?.startsWith('ERR_HTTP2_')) return Object.assign(new Error(`${err.message} (${err.code})`, { cause: err }), { code: 'ECONNRESET' });
  return err;
}
