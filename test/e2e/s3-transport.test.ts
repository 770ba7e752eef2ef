/**
 * The S3 transport of bundles (issue 17), on moto's S3 and the real control plane:
 * - proxies: `backup --out s3://` with HTTP_PROXY/HTTPS_PROXY set sends every S3 call through a counting proxy
 *   (test/support/counting-proxy.ts); NO_PROXY=127.0.0.1 sends them direct. moto speaks plain http, and by the
 *   convention curl and proxy-from-env follow HTTPS_PROXY covers https:// endpoints (AWS itself) and HTTP_PROXY
 *   http:// ones (a MinIO on http), so HTTPS_PROXY alone leaves these calls direct.
 */
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCountingProxy, type CountingProxy } from '../support/counting-proxy.js';
import { startMoto, type Moto } from '../support/moto.js';
import { runCli } from './helpers.js';

const BUCKET = 'cnr-transport';

describe('S3 transport (moto)', () => {
  let moto: Moto;
  let s3: S3Client;
  let proxy: CountingProxy;
  let env: Record<string, string>;
  const none = { HTTPS_PROXY: '', https_proxy: '', HTTP_PROXY: '', http_proxy: '', ALL_PROXY: '', all_proxy: '', NO_PROXY: '', no_proxy: '' };

  beforeAll(async () => {
    moto = await startMoto();
    proxy = await startCountingProxy();
    env = { ...moto.env, ...none, AWS_ENDPOINT_URL_S3: moto.url, NODE_NO_WARNINGS: '1' };
    s3 = new S3Client({ region: 'us-east-1', endpoint: moto.url, forcePathStyle: true, credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' } });
    await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
  }, 120_000);
  afterAll(async () => {
    s3?.destroy();
    await proxy?.close();
    await moto?.stop();
  });

  it('backup --out s3:// goes through HTTP_PROXY/HTTPS_PROXY; NO_PROXY=127.0.0.1 and HTTPS_PROXY alone (http endpoint) go direct', async () => {
    const target = `127.0.0.1:${moto.port}`;
    const listed = async (extra: Record<string, string>) => {
      const r = await runCli(['list', `s3://${BUCKET}/proxied`, '-o', 'json'], { env: { ...env, ...extra } });
      expect(r.code, r.stderr).toBe(0);
      return JSON.parse(r.stdout).map((b: any) => b.id);
    };
    const ex = await runCli(['backup', '--out', `s3://${BUCKET}/proxied`, '-o', 'json'], { env: { ...env, HTTPS_PROXY: proxy.url, HTTP_PROXY: proxy.url } });
    expect(ex.code, ex.stderr).toBe(0);
    const viaProxy = proxy.count(target);
    expect(viaProxy).toBeGreaterThan(0);
    expect(await listed({ HTTPS_PROXY: proxy.url, HTTP_PROXY: proxy.url })).toEqual([JSON.parse(ex.stdout).bundleId]);
    const afterList = proxy.count(target);
    expect(afterList).toBeGreaterThan(viaProxy);

    expect(await listed({ HTTPS_PROXY: proxy.url, HTTP_PROXY: proxy.url, NO_PROXY: '127.0.0.1', no_proxy: '127.0.0.1' })).toHaveLength(1);
    expect(await listed({ HTTPS_PROXY: proxy.url })).toHaveLength(1);
    expect(proxy.count(target)).toBe(afterList);
  });
});
