#!/usr/bin/env node
/**
 * Carries the kube-apiserver's TCP port into a kwok node's network namespace. The CNI plugin runs in that
 * namespace (its host-side veth and routes land there, not on this machine), where 127.0.0.1 is the namespace's own
 * loopback; a Unix socket is reachable from every namespace. Two halves:
 * - `serveUnixToTcp` in the supervisor (this machine's namespace): socket -> 127.0.0.1:port;
 * - this script, started with `ip netns exec <node ns>`: 127.0.0.1:port in the namespace -> socket.
 * The kubeconfig then works unchanged in both (same address, same port, same certificate).
 * Usage: api-bridge.js <port> <socket>
 *        api-bridge.js --probe <port> <wait ms>   (the health check, node-side-bridge.ts: exit 0 once a connect to
 *        127.0.0.1:port succeeds, retried every 50 ms for at most <wait ms>; 1 when none did)
 */
import net from 'node:net';
import { rmSync } from 'node:fs';

function pipe(a: net.Socket, b: net.Socket): void {
  a.pipe(b);
  b.pipe(a);
  const end = () => {
    a.destroy();
    b.destroy();
  };
  a.on('error', end);
  b.on('error', end);
  a.on('close', end);
  b.on('close', end);
}

/** Listens on the Unix socket `path` and forwards each connection to 127.0.0.1:`port`. */
export function serveUnixToTcp(path: string, port: number): net.Server {
  rmSync(path, { force: true });
  const server = net.createServer((c) => pipe(c, net.connect(port, '127.0.0.1')));
  server.listen(path);
  return server;
}

/** Connects to 127.0.0.1:port until it works or `waitMs` has passed: exit 0 when it did, 1 when not. */
function probe(port: number, waitMs: number): void {
  const deadline = Date.now() + waitMs;
  const attempt = () => {
    const s = net.connect(port, '127.0.0.1', () => {
      s.destroy();
      process.exit(0);
    });
    s.on('error', () => (Date.now() < deadline ? setTimeout(attempt, 50) : process.exit(1)));
  };
  attempt();
}

if (process.argv[1] && /api-bridge\.[jt]s$/.test(process.argv[1]) && process.argv[2] === '--probe') {
  probe(Number(process.argv[3]), Number(process.argv[4] ?? 0));
} else if (process.argv[1] && /api-bridge\.[jt]s$/.test(process.argv[1])) {
  const [port, socket] = process.argv.slice(2);
  if (!port || !socket) {
    process.stderr.write('usage: api-bridge.js <port> <socket>\n');
    process.exit(2);
  }
  net.createServer((c) => pipe(c, net.connect(socket))).listen(Number(port), '127.0.0.1');
}
