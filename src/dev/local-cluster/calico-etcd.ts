import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { goProgramEnv, singleMemberEtcdArgs } from './component-args.js';

/**
 * The etcd Calico keeps its data in when installed on the etcd datastore (calico-etcd.yaml): a second etcd,
 * separate from the one under kube-apiserver, as a user's cluster has it. The cluster's own etcd binary, its own
 * CA, a server certificate for 127.0.0.1 and one client certificate, `--client-cert-auth` (calico-etcd.yaml's TLS
 * settings have something real to check). Its process is recorded in the cluster's state, its data and
 * certificates live in the cluster's work directory: `down` stops it and removes them with the rest.
 * The gRPC JSON gateway (`/v3/kv/range` on the client URL) is etcd's default and left on: tests read keys with it.
 */
export interface CalicoEtcd {
  /** `https://127.0.0.1:<port>`: what calico-config's `etcd_endpoints` says. */
  endpoint: string;
  port: number;
  /** PEM files on this machine: the CA, and the client certificate and key Calico's programs present. */
  caFile: string;
  certFile: string;
  keyFile: string;
}

/** In the cluster's block of 100 ports: base..base+4 are the control plane's, +40..+42 some tests' own servers. */
export const calicoEtcdPorts = (portBase: number) => ({ client: portBase + 10, peer: portBase + 11 });

export const calicoEtcdDir = (workDir: string): string => path.join(workDir, 'calico-etcd');

/** Where the files are for a cluster's work directory and port block (whether or not it runs). */
export function calicoEtcdInfo(workDir: string, portBase: number): CalicoEtcd {
  const pki = path.join(calicoEtcdDir(workDir), 'pki');
  const port = calicoEtcdPorts(portBase).client;
  return {
    endpoint: `https://127.0.0.1:${port}`,
    port,
    caFile: path.join(pki, 'ca.crt'),
    certFile: path.join(pki, 'client.crt'),
    keyFile: path.join(pki, 'client.key'),
  };
}

/** A CA, a server certificate for 127.0.0.1 and a client certificate, made with openssl; keys 0600. */
export function makeCalicoEtcdPki(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const run = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  run(['req', '-x509', ...ec, '-days', '3650', '-subj', '/CN=calico-etcd-ca', '-keyout', 'ca.key', '-out', 'ca.crt']);
  const ext = (name: string, usage: string, san = '') =>
    writeFileSync(
      path.join(dir, `${name}.ext`),
      `basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=${usage}\n${san}`,
    );
  // clientAuth too: etcd's JSON gateway dials etcd's own client URL with this certificate, and under
  // --client-cert-auth a server-only certificate is refused there (the gateway then answers 503 to every request).
  ext('server', 'serverAuth,clientAuth', 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  ext('client', 'clientAuth');
  for (const [name, cn] of [
    ['server', 'calico-etcd'],
    ['client', 'calico'],
  ] as const) {
    run(['req', ...ec, '-subj', `/CN=${cn}`, '-keyout', `${name}.key`, '-out', `${name}.csr`]);
    run([
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-days',
      '3650',
      '-extfile',
      `${name}.ext`,
      '-out',
      `${name}.crt`,
    ]);
  }
  for (const key of ['ca.key', 'server.key', 'client.key']) chmodSync(path.join(dir, key), 0o600);
}

/** etcd's flags: TLS on the client and peer URLs, client certificates required, the JSON gateway on (its default). */
export function calicoEtcdArgs(workDir: string, portBase: number): string[] {
  const dir = calicoEtcdDir(workDir);
  const pki = path.join(dir, 'pki');
  const p = calicoEtcdPorts(portBase);
  return [
    ...singleMemberEtcdArgs('calico', `${dir}/data`, 'https', p.client, p.peer),
    `--cert-file=${pki}/server.crt`,
    `--key-file=${pki}/server.key`,
    `--trusted-ca-file=${pki}/ca.crt`,
    '--client-cert-auth',
    `--peer-cert-file=${pki}/server.crt`,
    `--peer-key-file=${pki}/server.key`,
    `--peer-trusted-ca-file=${pki}/ca.crt`,
    '--unsafe-no-fsync=true',
    '--listen-metrics-urls=',
  ];
}

/**
 * Starts the Calico etcd (certificates made once per cluster run) and waits for its /health; returns its pid, also
 * given to `started` right after the spawn (for the cluster's state). `wipe`: its data and certificates removed first (a fresh etcd, as a new install gets).
 */
export async function startCalicoEtcd(
  binDir: string,
  workDir: string,
  portBase: number,
  opts: { wipe?: boolean; started?: (pid: number) => void } = {},
): Promise<number> {
  const dir = calicoEtcdDir(workDir);
  const info = calicoEtcdInfo(workDir, portBase);
  if (opts.wipe) rmSync(dir, { recursive: true, force: true });
  if (!existsSync(info.certFile)) makeCalicoEtcdPki(path.join(dir, 'pki'));
  const out = openSync(path.join(workDir, 'calico-etcd.log'), 'a');
  const child = spawn(path.join(binDir, 'etcd'), calicoEtcdArgs(workDir, portBase), { detached: true, stdio: ['ignore', out, out], env: goProgramEnv() });
  child.unref();
  opts.started?.(child.pid!);
  const deadline = Date.now() + 60_000;
  while (!(await calicoEtcdHealthy(info))) {
    if (Date.now() > deadline) throw new Error(`the Calico etcd did not become healthy within 60 s; see ${path.join(workDir, 'calico-etcd.log')}`);
    await new Promise((r) => setTimeout(r, 250));
  }
  return child.pid!;
}

/** /health over TLS with the client certificate (the server refuses a connection without one). */
export function calicoEtcdHealthy(info: CalicoEtcd): Promise<boolean> {
  return new Promise((resolve) => {
    const req = https.get(`${info.endpoint}/health`, { timeout: 2000, ...tlsOptions(info) }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => {
      req.destroy();
      resolve(false);
    });
  });
}

/** The CA and client certificate for an HTTPS request to the Calico etcd (its JSON gateway). */
export function tlsOptions(info: CalicoEtcd): { ca: Buffer; cert: Buffer; key: Buffer } {
  return { ca: readFileSync(info.caFile), cert: readFileSync(info.certFile), key: readFileSync(info.keyFile) };
}

/**
 * Every key under `prefix` and its value, read through etcd's gRPC JSON gateway (`POST /v3/kv/range`, keys and
 * values base64 in its JSON), with the client certificate: what Calico keeps under /calico/ without a Calico program.
 */
export function etcdRange(info: CalicoEtcd, prefix: string): Promise<{ key: string; value: string }[]> {
  const end = Buffer.from(prefix);
  end[end.length - 1]!++;
  const body = JSON.stringify({ key: Buffer.from(prefix).toString('base64'), range_end: end.toString('base64') });
  return new Promise((resolve, reject) => {
    const req = https.request(
      `${info.endpoint}/v3/kv/range`,
      { method: 'POST', timeout: 10_000, headers: { 'content-type': 'application/json' }, ...tlsOptions(info) },
      (res) => {
        let text = '';
        res.on('data', (b) => (text += b));
        res.on('end', () => {
          if (res.statusCode !== 200) return reject(new Error(`etcd range ${prefix}: HTTP ${res.statusCode} ${text.slice(0, 200)}`));
          const kvs: { key: string; value?: string }[] = JSON.parse(text).kvs ?? [];
          const dec = (b?: string) => Buffer.from(b ?? '', 'base64').toString('utf8');
          resolve(kvs.map((kv) => ({ key: dec(kv.key), value: dec(kv.value) })));
        });
      },
    );
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error(`etcd range ${prefix}: timed out`)));
    req.end(body);
  });
}
