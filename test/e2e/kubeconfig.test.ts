/**
 * Kubeconfigs as kubectl takes them, through the CLI against the real control plane:
 * - an exec plugin issuing short-lived tokens, checked by a token-validating proxy in front of the API server: an
 *   export of 20,000 objects on 1-s tokens (the export now takes ~2.5-5 s) and a restore --resources of them on 5-s
 *   tokens (over a minute) succeed, and the plugin ran several times in each;
 * - KUBECONFIG=a:b --context in-b; a proxy-url that every request goes through; --as alice reaches the server as alice;
 * - a stopped API server fails at once (no retries: as fast as a successful status, give or take 5 s) with exit 4, one line;
 * - the in-cluster path: no kubeconfig, a service-account token and CA laid out as a Pod sees them.
 * The big restore brings back IPAM that running pods use: the population's allocations have their Pod objects
 * (podsForPopulation), their IPAMBlocks are lost with the IPAMHandles, and the restore ends with every
 * pod's address held in IPAM by that pod (expectPodAddressesHeld, issue 29) and each pod's handle back.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import yaml from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import { SERVICE_ACCOUNT_DIR } from '../../src/kube/connection.js';
import { apiForwarder, apiServerAccess, startConnectProxy, startTokenProxy, type ApiServerAccess } from '../support/kube-proxies.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { applyFixture, calicoType, deleteNodes, kubeconfig, resetCalico, runCli, testClient } from './helpers.js';
import { populateCalico } from './population.js';
import { podsForPopulation, populationPods } from './population-pods.js';
import { expectPodAddressesHeld } from './pod-ip-support.js';
import { readIpam } from './ipam-support.js';

const HANDLES = 20_000;
const HANDLE = calicoType('ipamhandles', 'IPAMHandle');
/** The population's namespace and nodes (its pods run there). */
const POP_NS = 'kc-app';
const POP_NODES = ['kc-node-1', 'kc-node-2', 'kc-node-3'];
const work = mkdtempSync(path.join(os.tmpdir(), 'cnr-kubeconfig-'));

/** A kubeconfig for the test cluster's CA with one context per entry. */
function writeConfig(name: string, a: ApiServerAccess, current: string, entries: { ctx: string; server: string; user: object; proxyUrl?: string }[]): string {
  const file = path.join(work, name);
  writeFileSync(
    file,
    yaml.dump({
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': current,
      clusters: entries.map((e) => ({
        name: `c-${e.ctx}`,
        cluster: { server: e.server, 'certificate-authority-data': a.ca.toString('base64'), ...(e.proxyUrl ? { 'proxy-url': e.proxyUrl } : {}) },
      })),
      users: entries.map((e) => ({ name: `u-${e.ctx}`, user: e.user })),
      contexts: entries.map((e) => ({ name: e.ctx, context: { cluster: `c-${e.ctx}`, user: `u-${e.ctx}` } })),
    }),
  );
  return file;
}

const adminUser = (a: ApiServerAccess) => ({ 'client-certificate-data': a.cert.toString('base64'), 'client-key-data': a.key.toString('base64') });

/** A port on 127.0.0.1 that nothing listens on (as a stopped API server leaves it). */
async function deadPort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

async function countHandles(client: KubeClient): Promise<number> {
  let n = 0;
  for await (const page of client.listPages(HANDLE, { limit: 500 })) n += page.items.length;
  return n;
}

describe('kubeconfig like kubectl, on the real control plane', () => {
  let client: KubeClient;
  let a: ApiServerAccess;

  beforeAll(async () => {
    client = await testClient();
    a = apiServerAccess(kubeconfig());
    await resetCalico(client);
    // A run stopped half-way leaves the population's pods behind: start without them.
    await client.delete(K.namespace, undefined, POP_NS);
    await client.waitFor(`namespace ${POP_NS} gone`, async () => ((await client.getOrUndefined(K.namespace, undefined, POP_NS)) ? undefined : true), {
      timeoutMs: 120_000,
    });
    await deleteNodes(client, 'kc-');
    await applyFixture(client, '3.28.1', 'tigera-operator.yaml');
  }, 600_000);
  afterAll(async () => {
    await client?.delete(K.namespace, undefined, POP_NS).catch(() => undefined);
    if (client) await deleteNodes(client, 'kc-').catch(() => undefined);
    client?.close();
  });

  it('KUBECONFIG=a:b --context in-b uses b.yaml; the current-context of a.yaml (a stopped server) fails at once with exit 4 (no retries)', async () => {
    const dead = `https://127.0.0.1:${await deadPort()}`;
    const fileA = writeConfig('a.yaml', a, 'in-a', [{ ctx: 'in-a', server: dead, user: adminUser(a) }]);
    const fileB = writeConfig('b.yaml', a, 'in-b', [{ ctx: 'in-b', server: a.server.href, user: adminUser(a) }]);
    const env = { KUBECONFIG: [fileA, fileB].join(path.delimiter) };
    const okStart = Date.now();
    const ok = await runCli(['status', '--context', 'in-b', '-o', 'json'], { env });
    const okTook = Date.now() - okStart;
    expect(ok.code, ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout).kubernetes).toMatchObject({ context: 'in-b', server: a.server.href.replace(/\/$/, '') });

    const t0 = Date.now();
    const down = await runCli(['status'], { env });
    const took = Date.now() - t0;
    expect(down.code, down.stderr).toBe(4);
    // No retrying a refused connection: as fast as the same command that succeeds, give or take 5 s, and far from
    // the 60 s retry budget. Measured side by side because a loaded machine slows both (19 s at load 33).
    expect(took, `status against the stopped server took ${took} ms, against the live one ${okTook} ms`).toBeLessThan(Math.min(okTook + 5000, 30_000));
    expect(down.stderr).toMatch(/cannot reach the Kubernetes API server \(ECONNREFUSED\)/);
    expect(down.stderr.trim().split('\n').length).toBeLessThanOrEqual(2); // one line and its hint
  });

  it('sends every request through the kubeconfig proxy-url (a token only the proxy path accepts)', async () => {
    // The proxy opens the tunnels and forwards with the admin certificate; the kubeconfig's own token is not
    // valid at the API server, so a request that bypassed the proxy would fail with 401.
    const proxy = await startConnectProxy({ cert: a.servingCert, key: a.servingKey, handler: apiForwarder(a) });
    try {
      const user = { token: 'valid-only-through-the-proxy' };
      const via = writeConfig('proxied.yaml', a, 'p', [{ ctx: 'p', server: a.server.href, user, proxyUrl: proxy.url }]);
      const r = await runCli(['status', '-o', 'json', '-v'], { env: { KUBECONFIG: via } });
      expect(r.code, r.stderr).toBe(0);
      expect(proxy.tunnels).toBeGreaterThanOrEqual(1);
      expect(proxy.requests).toBeGreaterThanOrEqual(3);

      const direct = writeConfig('direct.yaml', a, 'd', [{ ctx: 'd', server: a.server.href, user }]);
      const bypass = await runCli(['status'], { env: { KUBECONFIG: direct } });
      expect(bypass.code).toBe(4);
      expect(bypass.stderr).toMatch(/unauthorized \(HTTP 401\): the server did not accept the credentials of user "u-d" on GET/);
    } finally {
      await proxy.close();
    }
  });

  it('--as alice reaches the server as alice (RBAC answers for alice); with --as-group system:masters it succeeds', async () => {
    const denied = await runCli(['status', '--as', 'alice']);
    expect(denied.code).toBe(4);
    expect(denied.stderr).toMatch(/forbidden \(HTTP 403\): user "alice" may not (list|get) .*User "alice" cannot/);
    const allowed = await runCli(['status', '--as', 'alice', '--as-group', 'system:masters', '--as-group', 'system:authenticated']);
    expect(allowed.code, allowed.stderr).toBe(0);
  });

  it('runs inside a Pod: no kubeconfig, the service-account token and CA where a Pod has them', async () => {
    const ns = 'kubeconn-sa';
    await client.apply(K.namespace, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    await client.apply(K.serviceAccount, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'backup', namespace: ns } });
    const binding = { group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'clusterrolebindings', kind: 'ClusterRoleBinding', namespaced: false };
    await client.apply(binding, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'kubeconn-sa-view' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
      subjects: [{ kind: 'ServiceAccount', name: 'backup', namespace: ns }],
    } as any);
    const tr = await client.request('POST', `/api/v1/namespaces/${ns}/serviceaccounts/backup/token`, {
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } },
    });
    const root = path.join(work, 'pod');
    mkdirSync(root + SERVICE_ACCOUNT_DIR, { recursive: true });
    writeFileSync(path.join(root + SERVICE_ACCOUNT_DIR, 'token'), tr.status.token);
    writeFileSync(path.join(root + SERVICE_ACCOUNT_DIR, 'ca.crt'), a.ca);
    writeFileSync(path.join(root + SERVICE_ACCOUNT_DIR, 'namespace'), ns);
    const home = path.join(work, 'home');
    mkdirSync(home, { recursive: true });
    const pod = { KUBECONFIG: '', HOME: home, KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: a.server.port, CNI_REWIND_POD_ROOT: root };
    const out = path.join(work, 'in-pod-bundle');
    const r = await runCli(['export', '--out', out, '-o', 'json'], { env: pod });
    expect(r.code, r.stderr).toBe(0);
    // The API server saw the service account: a token for it is what was sent (its own audit answer).
    const who = await runCli(['status', '--as', `system:serviceaccount:${ns}:nobody`], { env: pod });
    expect(who.stderr).toMatch(/forbidden \(HTTP 403\): user "system:serviceaccount:kubeconn-sa:nobody"/);
    // Without the Pod's environment there is no configuration at all.
    const none = await runCli(['status'], { env: { ...pod, KUBERNETES_SERVICE_HOST: '' } });
    expect(none.code, 'a missing kubeconfig is an environment error').toBe(4);
    expect(none.stderr).toMatch(/kubeconfig not found/);
  });

  it(`export (1-second tokens) and restore --resources (5-second tokens) of ${HANDLES.toLocaleString('en')} objects through an exec plugin both succeed`, async () => {
    const pop = await populateCalico(client, { prefix: 'kc', namespace: POP_NS, nodes: POP_NODES, extraHandles: HANDLES, customResources: false });
    expect(await countHandles(client)).toBeGreaterThanOrEqual(HANDLES);
    // The pods behind the population's allocations, running with those addresses on their nodes: restore puts back
    // only allocations a running pod uses (src/restore/ipam-use.ts).
    await createFakeNodes(
      client,
      POP_NODES.map((name) => ({ name })),
    );
    const pods = populationPods(pop);
    await podsForPopulation(client, pop);
    await expectPodAddressesHeld(client, pods.length);

    const secret = randomBytes(16).toString('hex');
    const sign = (exp: string) => createHmac('sha256', secret).update(exp).digest('hex');
    const tokens = await startTokenProxy(a, (t) => {
      const [exp, mac] = t.split('.');
      return !!exp && mac === sign(exp) && Date.now() < Number(exp);
    });
    const runs = path.join(work, 'plugin-runs');
    writeFileSync(runs, '');
    // How long the plugin's tokens live, per phase. Since bundle format 2.0 (packed kinds, 4 kinds at a time) the
    // export of 20,000 objects takes ~2.5-5 s here, about one 5-s token: 1-s tokens keep it a run that outlives its
    // token several times. The restore (over 40 s) runs on 5-s tokens, EKS-like.
    const ttl = path.join(work, 'token-ttl-ms');
    writeFileSync(ttl, '1000');
    const plugin = path.join(work, 'token-plugin.mjs');
    writeFileSync(
      plugin,
      `import { createHmac } from 'node:crypto';
import { appendFileSync, readFileSync } from 'node:fs';
appendFileSync(process.env.RUNS, 'x');
const exp = String(Date.now() + Number(readFileSync(process.env.TTL_FILE, 'utf8')));
const token = exp + '.' + createHmac('sha256', process.env.SECRET).update(exp).digest('hex');
process.stdout.write(JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential',
  status: { token, expirationTimestamp: new Date(Number(exp)).toISOString() } }));
`,
    );
    const user = {
      exec: {
        apiVersion: 'client.authentication.k8s.io/v1',
        command: process.execPath,
        args: [plugin],
        interactiveMode: 'Never',
        env: [
          { name: 'SECRET', value: secret },
          { name: 'RUNS', value: runs },
          { name: 'TTL_FILE', value: ttl },
        ],
      },
    };
    const env = { KUBECONFIG: writeConfig('exec.yaml', a, 'eks-like', [{ ctx: 'eks-like', server: tokens.url, user }]) };
    const pluginRuns = () => readFileSync(runs, 'utf8').length;
    try {
      const bundle = path.join(work, 'big');
      let t0 = Date.now();
      const ex = await runCli(['export', '--out', bundle], { env, timeoutMs: 900_000 });
      const exportMs = Date.now() - t0;
      expect(ex.code, ex.stderr).toBe(0);
      // The property under test: a run longer than one token's life (1 s here) that renewed its token on the way.
      expect(exportMs).toBeGreaterThan(1_000);
      const afterExport = pluginRuns();
      expect(afterExport).toBeGreaterThanOrEqual(2);

      // Lose the handles and blocks as in the incident (their CRDs deleted: the running pods' addresses are free in
      // IPAM), then restore them through the same plugin and proxy.
      const lost = ['ipamhandles.crd.projectcalico.org', 'ipamblocks.crd.projectcalico.org'];
      for (const crd of lost) await client.delete(K.crd, undefined, crd);
      await client.waitFor(
        'the ipamhandles and ipamblocks CRDs to be gone',
        async () => {
          for (const crd of lost) if (await client.getOrUndefined(K.crd, undefined, crd)) return undefined;
          return true;
        },
        { timeoutMs: 900_000, intervalMs: 2000 },
      );
      writeFileSync(ttl, '5000');
      t0 = Date.now();
      const rs = await runCli(['restore', bundle, '--resources', '--kinds', 'IPAMHandle', '--kinds', 'IPAMBlock', '--yes'], { env, timeoutMs: 1_500_000 });
      const restoreMs = Date.now() - t0;
      expect(rs.code, rs.stderr + rs.stdout.slice(-2000)).toBe(0);
      expect(restoreMs).toBeGreaterThan(10_000);
      expect(pluginRuns() - afterExport).toBeGreaterThanOrEqual(3);
      expect(await countHandles(client)).toBeGreaterThanOrEqual(HANDLES);
      // Every running pod's address is allocated to it again, and its handle records that one address.
      await expectPodAddressesHeld(client, pods.length);
      const { handles } = await readIpam(client);
      expect(pods.filter((p) => Object.values(handles.get(p.handle) ?? {}).reduce((a, n) => a + n, 0) !== 1).map((p) => p.handle)).toEqual([]);
      // Figures for the report: visible with --reporter=verbose.
      console.log(
        `export ${(exportMs / 1000).toFixed(1)} s, restore ${(restoreMs / 1000).toFixed(1)} s, plugin runs ${afterExport} + ${pluginRuns() - afterExport}, proxy accepted ${tokens.accepted}, rejected ${tokens.rejected}`,
      );
    } finally {
      await tokens.close();
    }
  }, 3_000_000);
});
