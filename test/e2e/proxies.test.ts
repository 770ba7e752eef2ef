/**
 * Every provider's HTTP goes through the proxy named by HTTPS_PROXY / HTTP_PROXY, and NO_PROXY is honoured: the
 * built CLI lists snapshots with each provider (moto for AWS, the GCP Compute fake, the Proxmox fake over HTTPS,
 * vcsim, the Azure ARM fake over HTTPS) while a counting proxy on 127.0.0.1 (test/support/counting-proxy.ts) sees the calls.
 * The emulators speak plain HTTP except the Proxmox fake: by the proxy-variable convention (curl, proxy-from-env)
 * HTTPS_PROXY covers https:// targets and HTTP_PROXY http:// ones, so both are set; the Proxmox case, an
 * https:// target with its own CA behind the tunnel, is run with HTTPS_PROXY alone.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCountingProxy, type CountingProxy } from '../support/counting-proxy.js';
import { startMoto, type Moto } from '../support/moto.js';
import { startVcsim, type VcsimHandle } from '../support/vcsim.js';
import { startAzureArmFake, type AzureArmFake } from '../fakes/azure-arm-fake.js';
import { startGcpComputeFake, type GcpComputeFake } from '../fakes/gcp-compute-fake.js';
import { ProxmoxFake } from '../fakes/proxmox-fake.js';
import { runCli } from './helpers.js';
import { selfSignedCert } from '../support/self-signed.js';

const PORT = Number(process.env.CNI_REWIND_E2E_PORT_BASE ?? 23443) + 42;
const TOKEN_ID = 'cnr@pve!proxy';
const SECRET = '0b5c6d1e-proxy-test-secret';

describe('HTTPS_PROXY / NO_PROXY for every provider (counting proxy on 127.0.0.1)', () => {
  let proxy: CountingProxy;
  let moto: Moto;
  let gcp: GcpComputeFake;
  let pve: ProxmoxFake;
  let vcsim: VcsimHandle;
  let azure: AzureArmFake;
  let dir: string;
  let cfg: string;
  const hostOf = (url: string) => new URL(url).host;
  const noProxyVars = { NO_PROXY: '', no_proxy: '' };

  beforeAll(async () => {
    proxy = await startCountingProxy();
    dir = mkdtempSync(path.join(tmpdir(), 'cnr-proxy-'));
    const { caFile, keyFile } = selfSignedCert(dir, 'pve');
    [moto, gcp, vcsim, azure] = await Promise.all([startMoto(), startGcpComputeFake(), startVcsim({ port: PORT }), startAzureArmFake()]);
    pve = new ProxmoxFake({
      tokenId: TOKEN_ID,
      tokenSecret: SECRET,
      tls: { key: readFileSync(keyFile, 'utf8'), cert: readFileSync(caFile, 'utf8') },
      vms: [{ node: 'pve1', vmid: 101, name: 'vm1', status: 'running', config: { scsi0: 'local-lvm:vm-101-disk-0,size=8G' } }],
    });
    await pve.start();
    cfg = path.join(dir, 'cni-rewind.yaml');
    writeFileSync(
      cfg,
      `providers:\n  gcp:\n    endpoint: ${gcp.url}\n    auth: none\n    project: ${gcp.project}\n  proxmox:\n    caFile: ${caFile}\n  azure:\n    endpoint: ${azure.url}\n    subscriptionId: ${azure.subscription}\n`,
    );
  });

  afterAll(async () => {
    await Promise.all([moto?.stop(), gcp?.close(), vcsim?.stop(), pve?.stop(), azure?.close(), proxy?.close()]);
  });

  const list = (provider: string, env: Record<string, string>) =>
    runCli(['snapshots', 'list', '--provider', provider, '--all-clusters', '--config', cfg, '-o', 'json'], {
      env: {
        ...moto.env,
        GOVC_URL: vcsim.url,
        GOVC_USERNAME: vcsim.username,
        GOVC_PASSWORD: vcsim.password,
        PROXMOX_VE_ENDPOINT: pve.url,
        PROXMOX_VE_API_TOKEN: `${TOKEN_ID}=${SECRET}`,
        ...azure.credentialEnv,
        ...noProxyVars,
        ...env,
      },
    });

  for (const [provider, target] of [
    ['aws', () => hostOf(moto.url)],
    ['gcp', () => hostOf(gcp.url)],
    ['vsphere', () => hostOf(vcsim.url)],
  ] as const) {
    it(`${provider}: calls go through the proxy; NO_PROXY=127.0.0.1 sends them direct`, async () => {
      const before = proxy.count(target());
      const r = await list(provider, { HTTPS_PROXY: proxy.url, HTTP_PROXY: proxy.url });
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toEqual([]);
      expect(proxy.count(target())).toBeGreaterThan(before);
      const mid = proxy.count(target());
      const direct = await list(provider, { HTTPS_PROXY: proxy.url, HTTP_PROXY: proxy.url, NO_PROXY: '127.0.0.1', no_proxy: '127.0.0.1' });
      expect(direct.code, direct.stderr).toBe(0);
      expect(proxy.count(target())).toBe(mid);
    });
  }

  it('proxmox (https:// with its own CA): HTTPS_PROXY alone tunnels the calls, TLS verified behind the tunnel', async () => {
    const target = hostOf(pve.url);
    const r = await list('proxmox', { HTTPS_PROXY: proxy.url });
    expect(r.code, r.stderr).toBe(0);
    expect(proxy.count(target)).toBeGreaterThan(0);
    // The fake saw the calls, with the token, through the tunnel.
    expect(pve.requests.length).toBeGreaterThan(0);
    const mid = proxy.count(target);
    const direct = await list('proxmox', { HTTPS_PROXY: proxy.url, NO_PROXY: '127.0.0.1' });
    expect(direct.code, direct.stderr).toBe(0);
    expect(proxy.count(target)).toBe(mid);
    // Behind the tunnel the certificate is still checked: without the CA the call is refused.
    const noCa = path.join(dir, 'no-ca.yaml');
    writeFileSync(noCa, 'providers: {}\n');
    const refused = await runCli(['snapshots', 'list', '--provider', 'proxmox', '--all-clusters', '--config', noCa], {
      env: { PROXMOX_VE_ENDPOINT: pve.url, PROXMOX_VE_API_TOKEN: `${TOKEN_ID}=${SECRET}`, ...noProxyVars, HTTPS_PROXY: proxy.url },
    });
    expect(refused.code).toBe(4);
    expect(refused.stderr).toMatch(/certificate/i);
  });

  it('azure (https:// ARM and its token endpoint): HTTPS_PROXY alone tunnels the calls; NO_PROXY=127.0.0.1 sends them direct', async () => {
    const target = hostOf(azure.url);
    const before = proxy.count(target);
    const seen = azure.requests.length;
    const r = await list('azure', { HTTPS_PROXY: proxy.url });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual([]);
    expect(proxy.count(target)).toBeGreaterThan(before);
    // The token and the snapshot listing both reached the fake, through the tunnel.
    expect(azure.requests.slice(seen).map((q) => q.path)).toEqual(
      expect.arrayContaining(['/msi/token', `/subscriptions/${azure.subscription}/providers/Microsoft.Compute/snapshots`]),
    );
    const mid = proxy.count(target);
    const direct = await list('azure', { HTTPS_PROXY: proxy.url, NO_PROXY: '127.0.0.1', no_proxy: '127.0.0.1' });
    expect(direct.code, direct.stderr).toBe(0);
    expect(proxy.count(target)).toBe(mid);
    expect(azure.requests.length).toBeGreaterThan(seen + 2);
  });

  it('without any proxy variable nothing goes to the proxy', async () => {
    const total = () => [...proxy.counts.values()].reduce((a, b) => a + b, 0);
    const before = total();
    for (const p of ['aws', 'gcp', 'vsphere', 'proxmox', 'azure']) {
      const r = await list(p, { HTTPS_PROXY: '', HTTP_PROXY: '', https_proxy: '', http_proxy: '' });
      expect(r.code, `${p}: ${r.stderr}`).toBe(0);
    }
    expect(total()).toBe(before);
  });
});
