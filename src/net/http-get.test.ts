import { mkdtempSync, readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startConnectProxy, type ConnectProxy } from '../../test/support/kube-proxies.js';
import { selfSignedCert } from '../../test/support/self-signed.js';
import { httpGet } from './http-get.js';

/** Local servers only: an origin with a redirect, and a CONNECT proxy that counts its tunnels. */
let origin: http.Server;
let proxy: ConnectProxy;
let originUrl = '';
const saved = { HTTP_PROXY: process.env.HTTP_PROXY, NO_PROXY: process.env.NO_PROXY, NODE_TLS_REJECT_UNAUTHORIZED: process.env.NODE_TLS_REJECT_UNAUTHORIZED };

beforeAll(async () => {
  origin = http.createServer((req, res) => {
    if (req.url === '/old') res.writeHead(302, { location: '/manifests/calico.yaml' }).end();
    else if (req.url === '/manifests/calico.yaml') res.writeHead(200).end('kind: List\n');
    else if (req.url === '/endless') {
      res.writeHead(200);
      const chunk = Buffer.alloc(64 * 1024, 'x');
      const more = () => {
        while (res.write(chunk));
        res.once('drain', more);
      };
      res.on('close', () => res.removeAllListeners('drain'));
      more();
    } else res.writeHead(404).end();
  });
  await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
  originUrl = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
  proxy = await startConnectProxy();
});
afterAll(async () => {
  origin.close();
  await proxy.close();
});
afterEach(() => {
  for (const [k, v] of Object.entries(saved))
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
});

describe('httpGet', () => {
  it('goes through HTTP_PROXY, following redirects, and answers 404 as a status', async () => {
    process.env.HTTP_PROXY = proxy.url;
    delete process.env.NO_PROXY;
    const before = proxy.tunnels;
    const res = await httpGet(`${originUrl}/old`);
    expect(res.status).toBe(200);
    expect(await res.text(1024)).toBe('kind: List\n');
    expect(proxy.tunnels - before).toBe(2); // the redirect and its target
    expect((await httpGet(`${originUrl}/missing`)).status).toBe(404);
    expect(proxy.tunnels - before).toBe(3);
  });

  it('goes direct when NO_PROXY names the host', async () => {
    process.env.HTTP_PROXY = proxy.url;
    process.env.NO_PROXY = '127.0.0.1';
    const before = proxy.tunnels;
    const res = await httpGet(`${originUrl}/manifests/calico.yaml`);
    expect(await res.text(1024)).toBe('kind: List\n');
    expect(proxy.tunnels).toBe(before);
  });

  it('stops reading an answer longer than the limit (an endless body)', async () => {
    process.env.NO_PROXY = '127.0.0.1';
    const res = await httpGet(`${originUrl}/endless`);
    await expect(res.text(1024 * 1024)).rejects.toThrow('the answer is larger than 1048576 bytes');
  });

  it('refuses a redirect from https to http', async () => {
    process.env.NO_PROXY = '127.0.0.1';
    const { caFile, keyFile } = selfSignedCert(mkdtempSync(path.join(os.tmpdir(), 'cnr-http-get-')), 'origin');
    const tls = https.createServer({ cert: readFileSync(caFile), key: readFileSync(keyFile) }, (_req, res) =>
      res.writeHead(302, { location: `${originUrl}/manifests/calico.yaml` }).end(),
    );
    await new Promise<void>((r) => tls.listen(0, '127.0.0.1', r));
    // The self-signed origin is trusted for this test only (the agent takes no CA option).
    process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';
    try {
      await expect(httpGet(`https://127.0.0.1:${(tls.address() as AddressInfo).port}/calico.yaml`)).rejects.toThrow(
        /refusing the redirect from https:\/\/127\.0\.0\.1:\d+\/calico\.yaml to http:/,
      );
    } finally {
      tls.close();
    }
  });
});
