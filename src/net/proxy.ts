import http from 'node:http';
import https from 'node:https';
import { BadInputError } from '../core/errors.js';

/**
 * Outgoing HTTP(S) through proxies the way kubectl does: a proxy named in the configuration (the kubeconfig's
 * `proxy-url`) wins; otherwise HTTPS_PROXY / HTTP_PROXY / ALL_PROXY and NO_PROXY (either case) decide.
 * The proxy libraries are imported only when a proxy is in use.
 */
export async function proxyFor(target: string | URL, configured?: string): Promise<string | undefined> {
  if (configured) return configured;
  const { getProxyForUrl } = await import('proxy-from-env');
  return getProxyForUrl(target) || undefined;
}

/** A keep-alive agent for requests to `target`, through `proxy` when one is given (http, https or socks URLs). */
export async function makeAgent(target: URL, proxy: string | undefined, opts: https.AgentOptions): Promise<http.Agent> {
  const secure = target.protocol === 'https:';
  if (!proxy) return secure ? new https.Agent(opts) : new http.Agent(opts);
  let p: URL;
  try {
    p = new URL(proxy);
  } catch {
    throw new BadInputError(`proxy URL "${redactUserinfo(proxy)}" is not a URL`, { hint: 'use http://host:port, https://host:port or socks5://host:port' });
  }
  if (p.protocol.startsWith('socks')) {
    const { SocksProxyAgent } = await import('socks-proxy-agent');
    return new SocksProxyAgent(p, opts) as unknown as http.Agent;
  }
  if (p.protocol !== 'http:' && p.protocol !== 'https:') {
    throw new BadInputError(`proxy URL "${redactUserinfo(proxy)}" has an unsupported scheme ${p.protocol}`, { hint: 'use http://, https:// or socks5://' });
  }
  const { HttpProxyAgent, HttpsProxyAgent } = await import('hpagent');
  return secure ? new HttpsProxyAgent({ ...opts, proxy: p }) : new HttpProxyAgent({ ...opts, proxy: p });
}

/** A proxy URL fit for messages: its user and password removed. */
export function redactUserinfo(u: string): string {
  return u.replace(/\/\/[^/@]*@/, '//***@');
}
