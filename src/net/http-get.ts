import http from 'node:http';
import https from 'node:https';
import { makeAgent, proxyFor } from './proxy.js';

export interface HttpGetResponse {
  status: number;
  ok: boolean;
  /** The body as text; an answer longer than `maxBytes` is an error (an endless body would fill the memory). */
  text(maxBytes: number): Promise<string>;
}

/**
 * GET a URL, following redirects, through the proxy HTTPS_PROXY/HTTP_PROXY/NO_PROXY select
 * (Node's fetch ignores those variables on Node 20 and 22). A redirect from https:// to anything else is refused:
 * following it would hand the answer to whoever sits on the plain connection.
 */
export async function httpGet(url: string, opts: { timeoutMs?: number; maxRedirects?: number } = {}): Promise<HttpGetResponse> {
  let target = new URL(url);
  for (let hops = 0; ; hops++) {
    const agent = await makeAgent(target, await proxyFor(target), {});
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = (target.protocol === 'https:' ? https : http).get(target, { agent, timeout: opts.timeoutMs ?? 60_000 }, resolve);
      req.on('timeout', () => req.destroy(new Error(`no answer within ${Math.round((opts.timeoutMs ?? 60_000) / 1000)} s`)));
      req.on('error', reject);
    });
    const status = res.statusCode ?? 0;
    if (status >= 300 && status < 400 && res.headers.location && hops < (opts.maxRedirects ?? 5)) {
      res.resume();
      agent.destroy();
      const next = new URL(res.headers.location, target);
      if (target.protocol === 'https:' && next.protocol !== 'https:')
        throw new Error(`refusing the redirect from ${target.href} to ${next.protocol}// (not https)`);
      if (next.protocol !== 'https:' && next.protocol !== 'http:') throw new Error(`refusing the redirect from ${target.href} to ${next.protocol}//`);
      target = next;
      continue;
    }
    return {
      status,
      ok: status >= 200 && status < 300,
      text: async (maxBytes: number) => {
        const chunks: Buffer[] = [];
        let total = 0;
        try {
          for await (const c of res) {
            total += (c as Buffer).length;
            if (total > maxBytes) throw new Error(`the answer is larger than ${maxBytes} bytes`);
            chunks.push(c as Buffer);
          }
        } finally {
          res.destroy();
          agent.destroy();
        }
        return Buffer.concat(chunks).toString('utf8');
      },
    };
  }
}
