import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { KubeClient, KubeConnectionError } from './client.js';
import { connect, SERVICE_ACCOUNT_DIR } from './connection.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-conn-'));
const saved = { ...process.env };
afterEach(() => {
  for (const k of ['KUBECONFIG', 'KUBERNETES_SERVICE_HOST', 'KUBERNETES_SERVICE_PORT', 'CNI_REWIND_POD_ROOT', 'HOME', 'HTTPS_PROXY', 'NO_PROXY']) {
    if (saved[k] === undefined) delete process.env[k];
    else process.env[k] = saved[k];
  }
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A kubeconfig (JSON is YAML) with the given clusters/users/contexts; insecure http servers need no certificates. */
function kubeconfig(
  name: string,
  cfg: {
    current?: string;
    entries: { ctx: string; cluster: string; server: string; user: string; userSpec?: object; proxy?: string; clusterSpec?: object }[];
  },
): string {
  const file = path.join(dir, name);
  writeFileSync(
    file,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': cfg.current,
      clusters: cfg.entries.map((e) => ({
        name: e.cluster,
        cluster: { server: e.server, ...(e.clusterSpec ?? { 'insecure-skip-tls-verify': true }), ...(e.proxy ? { 'proxy-url': e.proxy } : {}) },
      })),
      users: cfg.entries.map((e) => ({ name: e.user, user: e.userSpec ?? { token: `token-of-${e.user}` } })),
      contexts: cfg.entries.map((e) => ({ name: e.ctx, context: { cluster: e.cluster, user: e.user } })),
    }),
  );
  return file;
}

describe('connect: kubeconfig loading like kubectl', () => {
  it('merges a KUBECONFIG list: contexts of later files are found, the first current-context and first definition win', async () => {
    const a = kubeconfig('a.yaml', { current: 'in-a', entries: [{ ctx: 'in-a', cluster: 'shared', server: 'http://127.0.0.1:1001', user: 'ua' }] });
    const b = kubeconfig('b.yaml', {
      current: 'in-b',
      entries: [
        { ctx: 'in-b', cluster: 'cb', server: 'http://127.0.0.1:1002', user: 'ub' },
        { ctx: 'shadowed', cluster: 'shared', server: 'http://127.0.0.1:9999', user: 'ub' },
      ],
    });
    process.env.KUBECONFIG = [path.join(dir, 'missing.yaml'), a, b].join(path.delimiter);
    const first = await connect({});
    expect(first.contextName).toBe('in-a');
    expect(first.server).toBe('http://127.0.0.1:1001');
    const inB = await connect({ context: 'in-b' });
    expect(inB.server).toBe('http://127.0.0.1:1002');
    expect((await inB.authHeaders()).Authorization).toBe('Bearer token-of-ub');
    // A cluster named in both files is a.yaml's.
    expect((await connect({ context: 'shadowed' })).server).toBe('http://127.0.0.1:1001');
    await expect(connect({ context: 'nowhere' })).rejects.toThrow(/context "nowhere" not found in .*a\.yaml.*b\.yaml/);
  });

  it('uses the in-cluster service account when no kubeconfig exists and KUBERNETES_SERVICE_HOST is set', async () => {
    const root = path.join(dir, 'pod');
    mkdirSync(root + SERVICE_ACCOUNT_DIR, { recursive: true });
    writeFileSync(path.join(root + SERVICE_ACCOUNT_DIR, 'token'), 'sa-token-1');
    writeFileSync(path.join(root + SERVICE_ACCOUNT_DIR, 'ca.crt'), '');
    writeFileSync(path.join(root + SERVICE_ACCOUNT_DIR, 'namespace'), 'backups');
    delete process.env.KUBECONFIG;
    process.env.HOME = path.join(dir, 'empty-home');
    await expect(connect({})).rejects.toThrow(/kubeconfig not found/);
    Object.assign(process.env, { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: '6443', CNI_REWIND_POD_ROOT: root });
    const c = await connect({});
    expect(c.server).toBe('https://127.0.0.1:6443');
    expect(c.source).toMatch(/in-cluster/);
    expect((await c.authHeaders()).Authorization).toBe('Bearer sa-token-1');
    // A rotated token is read again when a 401 asks for fresh credentials.
    writeFileSync(path.join(root + SERVICE_ACCOUNT_DIR, 'token'), 'sa-token-2');
    expect(await c.refreshCredentials()).toBe(true);
    expect((await c.authHeaders()).Authorization).toBe('Bearer sa-token-2');
    // An explicit --kubeconfig that does not exist is an error, not a silent fallback to the service account.
    await expect(connect({ kubeconfig: path.join(dir, 'nope.yaml') })).rejects.toThrow(/kubeconfig not found/);
  });

  it('a kubeconfig that is missing or cannot be read as a file is an environment error (exit 4); one that is not a kubeconfig is bad input (2)', async () => {
    delete process.env.KUBECONFIG;
    process.env.HOME = path.join(dir, 'empty-home-2');
    await expect(connect({})).rejects.toMatchObject({ exitCode: 4, message: expect.stringMatching(/kubeconfig not found/) });
    await expect(connect({ kubeconfig: path.join(dir, 'nope.yaml') })).rejects.toMatchObject({ exitCode: 4 });
    await expect(connect({ kubeconfig: dir })).rejects.toMatchObject({ exitCode: 4, message: expect.stringMatching(/is a directory/) });
    await expect(connect({ kubeconfig: '/dev/zero' })).rejects.toMatchObject({ exitCode: 4, message: expect.stringMatching(/not a regular file/) });
    const notYaml = path.join(dir, 'not-yaml.yaml');
    writeFileSync(notYaml, 'clusters: [\n');
    await expect(connect({ kubeconfig: notYaml })).rejects.toMatchObject({ exitCode: 2 });
  });

  it('adds impersonation headers for --as and --as-group, and takes proxy-url or HTTPS_PROXY/NO_PROXY', async () => {
    const k = kubeconfig('p.yaml', {
      current: 'p',
      entries: [
        { ctx: 'p', cluster: 'cp', server: 'https://kube.example:6443', user: 'up', proxy: 'http://127.0.0.1:3128' },
        { ctx: 'q', cluster: 'cq', server: 'https://other.example:6443', user: 'up' },
      ],
    });
    const c = await connect({ kubeconfig: k, as: 'alice', asGroups: ['devs', 'ops'] });
    expect(c.userName).toBe('alice');
    const h = await c.authHeaders();
    expect(h['Impersonate-User']).toBe('alice');
    expect(h['Impersonate-Group']).toEqual(['devs', 'ops']);
    expect(c.proxy).toBe('http://127.0.0.1:3128');
    process.env.HTTPS_PROXY = 'http://127.0.0.1:3129';
    expect((await connect({ kubeconfig: k, context: 'q' })).proxy).toBe('http://127.0.0.1:3129');
    process.env.NO_PROXY = '.example';
    expect((await connect({ kubeconfig: k, context: 'q' })).proxy).toBeUndefined();
  });
});

describe('KubeClient credentials and reachability', () => {
  let server: http.Server;
  let port = 0;
  const seen: string[] = [];
  let minToken = 0;
  beforeAll(async () => {
    // A local fake API server: accepts the plugin's tokens numbered at least `minToken` (a lower one counts as revoked).
    server = http.createServer((req, res) => {
      const auth = String(req.headers.authorization ?? '');
      seen.push(auth);
      const n = Number(/^Bearer plugin-token-(\d+)$/.exec(auth)?.[1] ?? -1);
      if (n < minToken) {
        res
          .writeHead(401, { 'content-type': 'application/json' })
          .end(JSON.stringify({ kind: 'Status', reason: 'Unauthorized', message: 'Unauthorized', code: 401 }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ gitVersion: 'v1.36.0', major: '1', minor: '36' }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => server.close());

  /** An exec credential plugin (a node script) that counts its runs and issues tokens valid for `lifeMs`. */
  function pluginKubeconfig(user: string, lifeMs: number): string {
    const plugin = path.join(dir, 'plugin.mjs');
    writeFileSync(path.join(dir, 'plugin-count'), '0');
    writeFileSync(
      plugin,
      `import fs from 'node:fs';
const f = ${JSON.stringify(path.join(dir, 'plugin-count'))};
const n = Number(fs.readFileSync(f, 'utf8')) + 1;
fs.writeFileSync(f, String(n));
process.stdout.write(JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential',
  status: { token: 'plugin-token-' + n, expirationTimestamp: new Date(Date.now() + Number(process.env.LIFE_MS)).toISOString() } }));
`,
    );
    return kubeconfig(`${user}.yaml`, {
      current: 'x',
      entries: [
        {
          ctx: 'x',
          cluster: 'fake',
          server: `http://127.0.0.1:${port}`,
          user,
          userSpec: {
            exec: {
              apiVersion: 'client.authentication.k8s.io/v1',
              command: process.execPath,
              args: [plugin],
              env: [{ name: 'LIFE_MS', value: String(lifeMs) }],
              interactiveMode: 'Never',
            },
          },
        },
      ],
    });
  }
  const runs = () => Number(readFileSync(path.join(dir, 'plugin-count'), 'utf8'));

  it('runs the exec plugin again shortly before its token expires', async () => {
    const client = await KubeClient.connect({ kubeconfig: pluginKubeconfig('expiring', 1500) });
    await client.serverVersion();
    expect(runs()).toBe(1);
    await client.serverVersion();
    expect(runs()).toBe(1); // still valid: cached
    await new Promise((r) => setTimeout(r, 1300)); // past 80% of its life
    await client.serverVersion();
    expect(runs()).toBe(2);
    client.close();
  });

  it('on a 401 fetches new credentials once and retries; a second 401 is final', async () => {
    const client = await KubeClient.connect({ kubeconfig: pluginKubeconfig('revoked', 3_600_000) });
    await client.serverVersion();
    // The server no longer takes token 1 though it has not expired (revoked): one 401, a new token, success.
    minToken = 2;
    await client.serverVersion();
    expect(runs()).toBe(2);
    minToken = 1000;
    seen.length = 0;
    await expect(client.serverVersion()).rejects.toMatchObject({ statusCode: 401, user: 'revoked' });
    expect(seen).toEqual(['Bearer plugin-token-2', 'Bearer plugin-token-3']);
    minToken = 0;
    client.close();
  });

  it('a whole 2xx answer that is not JSON (a proxy login page) fails at once with what it was, never retried', async () => {
    let requests = 0;
    const proxyPage = http.createServer((req, res) => {
      requests++;
      res.writeHead(200, { 'Content-Type': 'text/html' });
      res.end('<html>sign in to the proxy</html>');
    });
    await new Promise<void>((r) => proxyPage.listen(0, '127.0.0.1', r));
    const port = (proxyPage.address() as AddressInfo).port;
    const k = kubeconfig('html.yaml', { current: 'h', entries: [{ ctx: 'h', cluster: 'html', server: `http://127.0.0.1:${port}`, user: 'uh' }] });
    const client = await KubeClient.connect({ kubeconfig: k });
    try {
      await expect(client.serverVersion()).rejects.toThrow('unparseable response from GET /version');
      expect(requests).toBe(1);
    } finally {
      client.close();
      await new Promise((r) => proxyPage.close(r));
    }
  });

  it('a server that is not listening fails at once, not after a minute of retries', async () => {
    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const deadPort = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const k = kubeconfig('dead.yaml', { current: 'd', entries: [{ ctx: 'd', cluster: 'dead', server: `http://127.0.0.1:${deadPort}`, user: 'ud' }] });
    const client = await KubeClient.connect({ kubeconfig: k });
    const t0 = Date.now();
    await expect(client.serverVersion()).rejects.toBeInstanceOf(KubeConnectionError);
    expect(Date.now() - t0).toBeLessThan(2000);
    client.close();
  });
});

describe('exec credential plugins', () => {
  it("a plugin's env: reaches the plugin only, never this process's environment", async () => {
    const plugin = path.join(dir, 'plugin.mjs');
    // Prints an ExecCredential whose token is the value it was given, so the test sees the plugin got it.
    writeFileSync(
      plugin,
      `process.stdout.write(JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status: { token: 'tok-' + process.env.CNR_TEST_PLUGIN_ENDPOINT } }));`,
    );
    const file = kubeconfig('exec-env', {
      current: 'c',
      entries: [
        {
          ctx: 'c',
          cluster: 'k',
          server: 'https://127.0.0.1:1',
          user: 'u',
          userSpec: {
            exec: {
              apiVersion: 'client.authentication.k8s.io/v1',
              command: process.execPath,
              args: [plugin],
              env: [{ name: 'CNR_TEST_PLUGIN_ENDPOINT', value: 'http://127.0.0.1:9/elsewhere' }],
              interactiveMode: 'Never',
            },
          },
        },
      ],
    });
    const conn = await connect({ kubeconfig: file });
    expect((await conn.authHeaders()).Authorization).toBe('Bearer tok-http://127.0.0.1:9/elsewhere');
    expect(process.env.CNR_TEST_PLUGIN_ENDPOINT).toBeUndefined();
  });
});

describe('files a kubeconfig names', () => {
  const withCa = (name: string, ca: string) =>
    kubeconfig(name, {
      current: 'c',
      entries: [{ ctx: 'c', cluster: 'k', server: 'https://127.0.0.1:1', user: 'u', clusterSpec: { 'certificate-authority': ca } }],
    });

  it('a certificate-authority that is a FIFO or /dev/zero is refused at once; a regular file is read', { timeout: 3000 }, async () => {
    const fifo = path.join(dir, 'ca.fifo');
    execFileSync('mkfifo', [fifo]);
    await expect(connect({ kubeconfig: withCa('kc-fifo', fifo) })).rejects.toThrow(`the kubeconfig's certificate-authority ${fifo} is not a regular file`);
    await expect(connect({ kubeconfig: withCa('kc-zero', '/dev/zero') })).rejects.toThrow(/certificate-authority \/dev\/zero is not a regular file/);
    const pem = path.join(dir, 'ca.pem');
    writeFileSync(pem, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
    const conn = await connect({ kubeconfig: withCa('kc-pem', pem) });
    expect(String(conn.tls.ca)).toBe(readFileSync(pem, 'utf8'));
  });
});
