/**
 * A counting forward proxy on 127.0.0.1 for tests: CONNECT tunnels (what the providers' proxy agents use, for
 * HTTPS and plain-HTTP targets alike) and absolute-form plain HTTP requests, each counted by target host:port.
 * It forwards only to 127.0.0.1: anything else is refused, so a test can never reach out through it.
 */
import http from 'node:http';
import net from 'node:net';

export interface CountingProxy {
  url: string;
  /** Requests or tunnels per target `host:port`. */
  counts: Map<string, number>;
  count(target: string): number;
  close(): Promise<void>;
}

export async function startCountingProxy(): Promise<CountingProxy> {
  const counts = new Map<string, number>();
  const seen = (target: string) => counts.set(target, (counts.get(target) ?? 0) + 1);
  const local = (host: string) => host === '127.0.0.1' || host === 'localhost';
  const sockets = new Set<net.Socket>();
  const server = http.createServer((req, res) => {
    const u = new URL(req.url ?? '');
    if (!local(u.hostname)) return void res.writeHead(403).end('only 127.0.0.1');
    seen(`${u.hostname}:${u.port || 80}`);
    const up = http.request({ host: u.hostname, port: u.port || 80, method: req.method, path: u.pathname + u.search, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.writeHead(502).end());
    req.pipe(up);
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.on('connect', (req, client: net.Socket, head) => {
    const [host, port] = (req.url ?? '').split(':');
    if (!host || !local(host)) return void client.end('HTTP/1.1 403 Forbidden\r\n\r\n');
    seen(`${host}:${port}`);
    const up = net.connect(Number(port), host, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length) up.write(head);
      up.pipe(client);
      client.pipe(up);
    });
    sockets.add(up);
    up.on('close', () => sockets.delete(up));
    up.on('error', () => client.destroy());
    client.on('error', () => up.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    counts,
    count: (target) => counts.get(target) ?? 0,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}
