/**
 * Proxies for every provider's HTTP: HTTPS_PROXY / HTTP_PROXY / ALL_PROXY and NO_PROXY, as curl and most tools
 * read them (proxy-from-env), decided per request so NO_PROXY can exclude some hosts of one client.
 *
 * One agent serves both schemes: a request whose URL has a proxy goes through it with CONNECT
 * (https-proxy-agent, which also tunnels plain-HTTP targets, as gaxios does); any other request uses a direct
 * keep-alive agent with the caller's TLS options (an extra CA, or insecure), which also apply to the target
 * behind the tunnel. Used by the AWS SDK (NodeHttpHandler agents), the GCP transporter, Proxmox and vSphere.
 */
import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import tls, { type PeerCertificate } from 'node:tls';
import { Agent, type AgentConnectOpts } from 'agent-base';
import { HttpsProxyAgent } from 'https-proxy-agent';
import { getProxyForUrl } from 'proxy-from-env';

const PROXY_VARS = ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy', 'ALL_PROXY', 'all_proxy'];

/** Whether any proxy variable is set (without one, providers keep their default agents). */
export function proxyConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  return PROXY_VARS.some((v) => !!env[v]);
}

export class EnvProxyAgent extends Agent {
  private readonly directHttp: http.Agent;
  private readonly directHttps: https.Agent;
  private readonly tunnels = new Map<string, HttpsProxyAgent<string>>();

  constructor(private readonly tlsOpts: Pick<https.AgentOptions, 'ca' | 'rejectUnauthorized'> = {}) {
    super({ keepAlive: true });
    this.directHttp = new http.Agent({ keepAlive: true });
    this.directHttps = new https.Agent({ keepAlive: true, ...tlsOpts });
  }

  override connect(req: http.ClientRequest, opts: AgentConnectOpts): Duplex | http.Agent | Promise<Duplex | http.Agent> {
    const url = `${opts.secureEndpoint ? 'https' : 'http'}://${opts.host}:${opts.port}${req.path}`;
    const proxy = getProxyForUrl(url);
    if (!proxy) return opts.secureEndpoint ? this.directHttps : this.directHttp;
    let tunnel = this.tunnels.get(proxy);
    if (!tunnel) {
      tunnel = new HttpsProxyAgent(proxy);
      this.tunnels.set(proxy, tunnel);
    }
    // https-proxy-agent drops `host` before the TLS upgrade and sets no servername for an IP address, so the
    // certificate would be checked against "localhost": check it against the host really asked for.
    const host = opts.host ?? 'localhost';
    const identity = { checkServerIdentity: (_: string, cert: PeerCertificate) => tls.checkServerIdentity(host, cert) };
    return tunnel.connect(req, { ...opts, ...this.tlsOpts, ...(opts.secureEndpoint ? identity : {}) } as AgentConnectOpts);
  }

  override destroy(): void {
    this.directHttp.destroy();
    this.directHttps.destroy();
    for (const t of this.tunnels.values()) t.destroy();
    super.destroy();
  }
}

/** A proxy-aware agent when a proxy variable is set, else undefined (keep the default). */
export function envProxyAgent(tlsOpts?: Pick<https.AgentOptions, 'ca' | 'rejectUnauthorized'>): EnvProxyAgent | undefined {
  return proxyConfigured() ? new EnvProxyAgent(tlsOpts) : undefined;
}
