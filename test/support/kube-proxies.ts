/**
 * Local stand-ins in front of the test API server, all on 127.0.0.1:
 * - `apiForwarder`: relays a request to the real API server with the admin client certificate (the caller's own
 *   Authorization is dropped, impersonation headers are kept), or as the caller;
 * - `startTokenProxy`: an HTTPS server that accepts only bearer tokens a check approves, then forwards (a stand-in
 *   for an API server that validates short-lived tokens, as EKS does for `aws eks get-token`);
 * - `startConnectProxy`: an HTTP CONNECT proxy (what HTTPS_PROXY / proxy-url point at) that counts tunnels and,
 *   given a certificate, opens them (TLS interception) to count and forward every request inside.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import yaml from 'js-yaml';

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

export interface ApiServerAccess {
  server: URL;
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
  /** The API server's own serving certificate and key (valid for 127.0.0.1): stand-ins present it too. */
  servingCert: Buffer;
  servingKey: Buffer;
}

/** Read the local cluster's admin credentials and serving certificate (its kubeconfig sits next to run/pki). */
export function apiServerAccess(kubeconfigFile: string): ApiServerAccess {
  const kc = yaml.load(readFileSync(kubeconfigFile, 'utf8')) as any;
  const b = (s: string) => Buffer.from(s, 'base64');
  const pki = path.join(path.dirname(kubeconfigFile), 'run', 'pki');
  return {
    server: new URL(kc.clusters[0].cluster.server),
    ca: b(kc.clusters[0].cluster['certificate-authority-data']),
    cert: b(kc.users[0].user['client-certificate-data']),
    key: b(kc.users[0].user['client-key-data']),
    servingCert: readFileSync(path.join(pki, 'apiserver.crt')),
    servingKey: readFileSync(path.join(pki, 'apiserver.key')),
  };
}

/** With `asCaller`, the caller's own Authorization is kept and no client certificate is sent (RBAC sees the caller). */
export function apiForwarder(a: ApiServerAccess, opts: { asCaller?: boolean } = {}): Handler {
  const agent = new https.Agent({ keepAlive: true, maxSockets: 32, ca: a.ca, ...(opts.asCaller ? {} : { cert: a.cert, key: a.key }) });
  return (req, res) => {
    const headers = { ...req.headers, host: a.server.host };
    if (!opts.asCaller) delete headers.authorization;
    const up = https.request({ hostname: a.server.hostname, port: a.server.port, method: req.method, path: req.url, headers, agent }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    req.pipe(up);
  };
}

function listen(server: net.Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
}

const close = (server: net.Server) =>
  new Promise<void>((r) => {
    (server as http.Server).closeAllConnections?.();
    server.close(() => r());
  });

export interface TokenProxy {
  url: string;
  accepted: number;
  rejected: number;
  close(): Promise<void>;
}

export async function startTokenProxy(a: ApiServerAccess, valid: (token: string) => boolean): Promise<TokenProxy> {
  const forward = apiForwarder(a);
  const stats = { accepted: 0, rejected: 0 };
  const server = https.createServer({ cert: a.servingCert, key: a.servingKey }, (req, res) => {
    const token = /^Bearer (.+)$/.exec(String(req.headers.authorization ?? ''))?.[1];
    if (!token || !valid(token)) {
      stats.rejected++;
      req.resume();
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Unauthorized', message: 'Unauthorized', code: 401 }));
      return;
    }
    stats.accepted++;
    forward(req, res);
  });
  const port = await listen(server);
  return {
    url: `https://127.0.0.1:${port}`,
    get accepted() {
      return stats.accepted;
    },
    get rejected() {
      return stats.rejected;
    },
    close: () => close(server),
  };
}

export interface ConnectProxy {
  url: string;
  /** CONNECT tunnels opened. */
  tunnels: number;
  /** Requests seen inside intercepted tunnels. */
  requests: number;
  /** `METHOD path?query` of each intercepted request, in order. */
  log: string[];
  close(): Promise<void>;
}

/**
 * A CONNECT proxy. Only 127.0.0.1 targets are allowed. With `intercept`, tunnels are terminated with that
 * certificate and each request inside is counted and handed to `intercept.handler` instead of the target.
 */
export async function startConnectProxy(intercept?: { cert: Buffer; key: Buffer; handler: Handler }): Promise<ConnectProxy> {
  const stats = { tunnels: 0, requests: 0 };
  const log: string[] = [];
  const inner = intercept
    ? http.createServer((req, res) => {
        stats.requests++;
        log.push(`${req.method} ${req.url}`);
        intercept.handler(req, res);
      })
    : undefined;
  const sockets = new Set<net.Socket>();
  const server = http.createServer((_req, res) => res.writeHead(405).end());
  server.on('connect', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    const [host, port] = String(req.url).split(':');
    if (host !== '127.0.0.1' && host !== 'localhost') {
      socket.end('HTTP/1.1 403 Forbidden\r\n\r\n');
      return;
    }
    stats.tunnels++;
    if (inner && intercept) {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      const secure = new tls.TLSSocket(socket, { isServer: true, cert: intercept.cert, key: intercept.key });
      inner.emit('connection', secure);
      return;
    }
    const up = net.connect(Number(port), '127.0.0.1', () => {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length) up.write(head);
      up.pipe(socket);
      socket.pipe(up);
    });
    up.on('error', () => socket.destroy());
    socket.on('error', () => up.destroy());
  });
  const port = await listen(server);
  return {
    url: `http://127.0.0.1:${port}`,
    get tunnels() {
      return stats.tunnels;
    },
    get requests() {
      return stats.requests;
    },
    log,
    close: async () => {
      for (const s of sockets) s.destroy();
      await close(server);
      if (inner) await close(inner);
    },
  };
}
