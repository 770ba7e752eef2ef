/**
 * How long a command takes from its process start to its first request to the API server, measured from outside
 * the command: a TCP relay on 127.0.0.1 in front of the API server notes when the first byte of the first
 * connection arrives (the TLS handshake that opens the first request), and the benchmark spawns the command with
 * a copy of the kubeconfig that points at the relay. Nothing in the command is changed or asked; the relay only
 * adds one local hop, which kubectl pays as well when it runs through the same copy.
 */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import yaml from 'js-yaml';

export interface ArrivalRelay {
  port: number;
  /** hrtime (ns) at which the first byte from any client arrived since the last `reset()`, if one did. */
  firstArrival(): bigint | undefined;
  reset(): void;
  close(): Promise<void>;
}

/** Listen on 127.0.0.1 and relay every connection to `upstream` (a 127.0.0.1 address: nothing leaves the machine). */
export async function startArrivalRelay(upstream: { host: string; port: number }): Promise<ArrivalRelay> {
  if (upstream.host !== '127.0.0.1' && upstream.host !== 'localhost') throw new Error(`the relay forwards only to 127.0.0.1, not ${upstream.host}`);
  let first: bigint | undefined;
  const sockets = new Set<net.Socket>();
  const track = (s: net.Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => s.destroy());
  };
  const server = net.createServer((client) => {
    track(client);
    client.once('data', () => (first ??= process.hrtime.bigint()));
    const up = net.connect(upstream.port, upstream.host);
    track(up);
    client.pipe(up);
    up.pipe(client);
    up.on('close', () => client.destroy());
    client.on('close', () => up.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    firstArrival: () => first,
    reset: () => (first = undefined),
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

interface KubeconfigDoc {
  clusters?: { name: string; cluster: { server?: string; 'certificate-authority'?: string } }[];
  users?: { name: string; user: Record<string, unknown> }[];
  contexts?: { name: string; context: { cluster: string } }[];
  'current-context'?: string;
}

function currentCluster(kubeconfig: string): { doc: KubeconfigDoc; cluster: NonNullable<KubeconfigDoc['clusters']>[number]; server: URL } {
  const doc = yaml.load(fs.readFileSync(kubeconfig, 'utf8')) as KubeconfigDoc;
  const ctx = doc.contexts?.find((c) => c.name === doc['current-context']);
  const cluster = doc.clusters?.find((c) => c.name === ctx?.context.cluster);
  if (!cluster?.cluster.server) throw new Error(`${kubeconfig}: no current cluster with a server`);
  return { doc, cluster, server: new URL(cluster.cluster.server) };
}

/** Where the kubeconfig's current cluster listens: what the relay forwards to. */
export function apiServerAddress(kubeconfig: string): { host: string; port: number } {
  const { server } = currentCluster(kubeconfig);
  return { host: server.hostname, port: Number(server.port || (server.protocol === 'https:' ? 443 : 80)) };
}

/**
 * Write a copy of `kubeconfig` into `dir` whose current cluster's server is the relay on `relayPort` (same scheme;
 * the local API server's certificate names 127.0.0.1, so TLS checks pass unchanged). Returns the copy's path.
 */
export function kubeconfigThroughRelay(kubeconfig: string, dir: string, relayPort: number): string {
  const { doc, cluster, server } = currentCluster(kubeconfig);
  // Files named relative to the kubeconfig stay found from the copy's folder.
  const absolute = (p: unknown) => (typeof p === 'string' && !path.isAbsolute(p) ? path.resolve(path.dirname(kubeconfig), p) : p);
  if (cluster.cluster['certificate-authority']) cluster.cluster['certificate-authority'] = absolute(cluster.cluster['certificate-authority']) as string;
  for (const u of doc.users ?? []) for (const k of ['client-certificate', 'client-key', 'tokenFile']) if (k in u.user) u.user[k] = absolute(u.user[k]);
  cluster.cluster.server = `${server.protocol}//127.0.0.1:${relayPort}`;
  const file = path.join(dir, 'kubeconfig-through-relay');
  fs.writeFileSync(file, yaml.dump(doc), { mode: 0o600 });
  return file;
}
