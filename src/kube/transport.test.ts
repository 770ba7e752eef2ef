import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http2 from 'node:http2';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { selfSignedCert } from '../../test/support/self-signed.js';
import { packageRoot } from '../core/package-root.js';
import { openTransport } from './transport.js';

/**
 * Real servers on 127.0.0.1 (Node's own HTTP/2 and HTTPS servers, with a certificate made for the test): which
 * protocol the client ends up speaking, how many TLS connections a burst of requests costs, and what a server
 * going away mid-request looks like to the client's retry rules.
 */
describe('transport', () => {
  let dir: string;
  let tls: { ca: Buffer; key: Buffer; cert: Buffer };
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-transport-'));
    const { caFile, keyFile } = selfSignedCert(dir, 'server');
    tls = { ca: readFileSync(caFile), cert: readFileSync(caFile), key: readFileSync(keyFile) };
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** An HTTP/2 server that also speaks HTTP/1.1 (as kube-apiserver does), counting TLS connections. */
  async function h2Server(handler: (path: string, stream: http2.ServerHttp2Stream) => void) {
    const server = http2.createSecureServer({ key: tls.key, cert: tls.cert, allowHTTP1: true });
    let connections = 0;
    server.on('secureConnection', () => connections++);
    server.on('stream', (stream, headers) => handler(String(headers[':path']), stream));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = new URL(`https://127.0.0.1:${(server.address() as AddressInfo).port}`);
    return { url, connections: () => connections, close: () => new Promise<void>((r) => server.close(() => r())) };
  }

  it('sends a burst of requests over one HTTP/2 connection, with their headers and bodies', async () => {
    const seen: string[] = [];
    const server = await h2Server((p, stream) => {
      let body = '';
      stream.on('data', (c) => (body += c));
      stream.on('end', () => {
        seen.push(`${p} ${body}`);
        stream.respond({ ':status': p === '/missing' ? 404 : 200, 'retry-after': '3' });
        stream.end(JSON.stringify({ path: p }));
      });
    });
    const t = await openTransport(server.url, undefined, { ca: tls.ca });
    try {
      const paths = Array.from({ length: 8 }, (_, i) => `/p${i}`);
      const answers = await Promise.all([
        ...paths.map((p) => t.send({ method: 'GET', path: p, headers: { Authorization: 'Bearer x' } })),
        t.send({ method: 'POST', path: '/missing', headers: { 'Content-Type': 'application/json' }, body: '{"a":1}' }),
      ]);
      expect(t.protocol).toBe('h2');
      expect(server.connections()).toBe(1);
      expect(answers.map((a) => a.status)).toEqual([...paths.map(() => 200), 404]);
      expect(JSON.parse(answers[3]!.body.toString()).path).toBe('/p3');
      expect(answers[8]!.headers['retry-after']).toBe('3');
      expect(seen).toContain('/missing {"a":1}');
    } finally {
      t.close();
      await server.close();
    }
  });

  it('falls back to HTTP/1.1 for good when the server does not offer h2', async () => {
    const server = https.createServer({ key: tls.key, cert: tls.cert }, (req, res) => res.end(JSON.stringify({ path: req.url })));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = new URL(`https://127.0.0.1:${(server.address() as AddressInfo).port}`);
    const t = await openTransport(url, undefined, { ca: tls.ca });
    try {
      const answers = await Promise.all(['/a', '/b'].map((p) => t.send({ method: 'GET', path: p, headers: {} })));
      expect(answers.map((a) => JSON.parse(a.body.toString()).path)).toEqual(['/a', '/b']);
      expect(t.protocol).toBe('http/1.1');
    } finally {
      t.close();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it('a request cut off by the server fails as a reset connection, and the next request opens a new session', async () => {
    let first = true;
    const server = await h2Server((p, stream) => {
      if (first) {
        first = false;
        // The server goes away mid-request, as a restarting API server does.
        stream.session?.destroy();
        return;
      }
      stream.respond({ ':status': 200 });
      stream.end('{}');
    });
    const t = await openTransport(server.url, undefined, { ca: tls.ca });
    try {
      const err = await t.send({ method: 'GET', path: '/x', headers: {} }).then(
        () => undefined,
        (e: Error & { code?: string }) => e,
      );
      expect(err?.code).toBe('ECONNRESET');
      expect((await t.send({ method: 'GET', path: '/y', headers: {} })).status).toBe(200);
      expect(server.connections()).toBe(2);
    } finally {
      t.close();
      await server.close();
    }
  });

  it('over HTTP/1.1 too, a body cut off mid-way fails as a reset connection, never as a short answer', async () => {
    // Headers promise 1000 bytes; 10 arrive, then the connection goes (the API server killed while answering a list).
    const server = https.createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': '1000' });
      res.write('{"items":[', () => res.socket?.destroy());
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = new URL(`https://127.0.0.1:${(server.address() as AddressInfo).port}`);
    const t = await openTransport(url, undefined, { ca: tls.ca });
    try {
      const outcome = await t.send({ method: 'GET', path: '/list', headers: {} }).then(
        (a) => `answered ${a.status} with ${a.body.length} bytes`,
        (e: Error & { code?: string }) => e.code,
      );
      expect(outcome).toBe('ECONNRESET');
      expect(t.protocol).toBe('http/1.1');
    } finally {
      t.close();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it('a server certificate the CA did not sign fails the TLS handshake, not later', async () => {
    const server = await h2Server((_p, stream) => stream.end());
    const other = selfSignedCert(dir, 'other');
    const t = await openTransport(server.url, undefined, { ca: readFileSync(other.caFile) });
    try {
      const err = await t.send({ method: 'GET', path: '/', headers: {} }).then(
        () => undefined,
        (e: Error & { code?: string }) => e,
      );
      expect(err?.code).toMatch(/CERT|SIGNATURE|SELF_SIGNED/);
    } finally {
      t.close();
      await server.close();
    }
  });

  it('a server that takes the connection and never answers fails within the request timeout', async () => {
    const held: net.Socket[] = [];
    const silent = net.createServer((socket) => held.push(socket));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const url = new URL(`https://127.0.0.1:${(silent.address() as AddressInfo).port}`);
    const t = await openTransport(url, undefined, { ca: tls.ca });
    try {
      const started = Date.now();
      const err = await t.send({ method: 'GET', path: '/', headers: {}, timeoutMs: 300 }).then(
        () => undefined,
        (e: Error & { code?: string }) => e,
      );
      expect(err?.code).toBe('ETIMEDOUT');
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      t.close();
      for (const socket of held) socket.destroy();
      await new Promise<void>((r) => silent.close(() => r()));
    }
  });

  /** Runs `body` (after a transport to `url` is opened as `t`) in a child process; only the transport keeps it alive. */
  function runChild(url: URL, body: string): Promise<{ code: number | null; stdout: string }> {
    const script = `
      const { openTransport } = await import(${JSON.stringify(pathToFileURL(path.join(packageRoot(), 'dist', 'src', 'kube', 'transport.js')).href)});
      const t = await openTransport(new URL(${JSON.stringify(url.href)}), undefined, { ca: ${JSON.stringify(tls.ca.toString())} });
      ${body}`;
    // Asynchronous: the server runs in this process.
    return new Promise((resolve) => {
      const child = execFile(process.execPath, ['--input-type=module', '-e', script], { timeout: 20_000 }, (err, stdout) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout }),
      );
      child.stdin?.end();
    });
  }

  it('a request on a new session keeps the command alive while a stream of the old session is still open', async () => {
    // The API server going away (GOAWAY) while a stream is in flight: the next request opens a second session. Once
    // the old stream is answered, the new one is still in flight and must hold the process. It once did not (one
    // count of streams for all sessions, so the second session was never referenced): the command ended with its
    // request unanswered ("waited on something that can never happen", seen under faults.test.ts's API server kill).
    let held: http2.ServerHttp2Stream | undefined;
    const server = await h2Server((p, stream) => {
      if (p === '/held') {
        held = stream;
        stream.session?.goaway(http2.constants.NGHTTP2_NO_ERROR, stream.id);
        return;
      }
      held?.respond({ ':status': 200 });
      held?.end('{}');
      setTimeout(() => {
        stream.respond({ ':status': 201 });
        stream.end('{}');
      }, 500);
    });
    try {
      const r = await runChild(
        server.url,
        `const first = t.send({ method: 'GET', path: '/held', headers: {} });
        await new Promise((r) => setTimeout(r, 300));
        const second = t.send({ method: 'GET', path: '/second', headers: {} });
        const answers = await Promise.all([first, second]);
        console.log(answers.map((a) => a.status).join(' '));`,
      );
      expect(server.connections()).toBe(2);
      expect(r.stdout.trim()).toBe('200 201');
      expect(r.code).toBe(0);
    } finally {
      await server.close();
    }
  });

  it('a finished command exits without closing the transport (the idle session holds no reference)', async () => {
    const server = await h2Server((_p, stream) => {
      stream.respond({ ':status': 200 });
      stream.end('{}');
    });
    try {
      // A child process that makes one request and does not close: it must exit on its own.
      const r = await runChild(
        server.url,
        `const r = await t.send({ method: 'GET', path: '/', headers: {} });
        console.log(r.status, t.protocol);`,
      );
      expect(r.stdout.trim()).toBe('200 h2');
      expect(r.code).toBe(0);
    } finally {
      await server.close();
    }
  });
});
