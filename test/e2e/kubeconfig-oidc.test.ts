/**
 * OIDC credentials that expire during a run: a kubeconfig with `auth-provider: oidc` whose id-token has
 * already expired, a fake OIDC issuer on 127.0.0.1 (test/support/fake-oidc.ts) issuing id-tokens valid 3 s, and the
 * token-validating proxy of the exec-plugin test (test/support/kube-proxies.ts) in front of the real API server,
 * accepting only unexpired id-tokens signed by that issuer. `wrap -- sleep 4` (a backup, a command longer than one
 * token, then the checks) succeeds and the refresh endpoint was called again after the first token.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import yaml from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { startFakeOidcIssuer } from '../support/fake-oidc.js';
import { apiServerAccess, startTokenProxy, type ApiServerAccess } from '../support/kube-proxies.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { deleteNodes, kubeconfig, resetCalico, runCli, testClient } from './helpers.js';
import { installCalico328 } from './plan-support.js';

const LIFETIME_S = 3;

describe('OIDC id-tokens refreshed during a run (fake issuer, token-validating proxy)', () => {
  let client: KubeClient;
  let a: ApiServerAccess;
  const work = mkdtempSync(path.join(os.tmpdir(), 'cnr-oidc-'));

  beforeAll(async () => {
    client = await testClient();
    a = apiServerAccess(kubeconfig());
    await resetCalico(client);
    await deleteNodes(client, 'oidc-');
    await createFakeNodes(client, [{ name: 'oidc-1' }]); // kwok runs the operator's pod there: wrap's checks pass
    await installCalico328(client);
  }, 600_000);
  afterAll(async () => {
    if (client) await deleteNodes(client, 'oidc-').catch(() => undefined);
    client?.close();
  });

  it(`wrap around a command longer than one ${LIFETIME_S} s id-token succeeds; the token endpoint was called again`, async () => {
    // The issuer presents the API server's serving certificate (valid for 127.0.0.1); the CLI trusts its CA through
    // NODE_EXTRA_CA_CERTS, as a user with a private IdP CA does (client-node ignores idp-certificate-authority).
    const idp = await startFakeOidcIssuer({ cert: a.servingCert, key: a.servingKey }, { lifetimeSeconds: LIFETIME_S });
    const proxy = await startTokenProxy(a, (t) => idp.verify(t));
    const caFile = path.join(work, 'ca.crt');
    writeFileSync(caFile, a.ca);
    const config = path.join(work, 'oidc.yaml');
    writeFileSync(
      config,
      yaml.dump({
        apiVersion: 'v1',
        kind: 'Config',
        'current-context': 'oidc',
        clusters: [{ name: 'c', cluster: { server: proxy.url, 'certificate-authority-data': a.ca.toString('base64') } }],
        users: [
          {
            name: 'oidc-user',
            user: {
              'auth-provider': {
                name: 'oidc',
                config: { 'idp-issuer-url': idp.issuer, 'client-id': idp.clientId, 'id-token': idp.expiredIdToken(), 'refresh-token': idp.refreshToken },
              },
            },
          },
        ],
        contexts: [{ name: 'oidc', context: { cluster: 'c', user: 'oidc-user' } }],
      }),
    );
    try {
      const t0 = Date.now();
      const r = await runCli(['wrap', '--out', path.join(work, 'bundle'), '--', 'sleep', String(LIFETIME_S + 1)], {
        env: { KUBECONFIG: config, NODE_EXTRA_CA_CERTS: caFile },
        timeoutMs: 300_000,
      });
      const ms = Date.now() - t0;
      expect(r.code, r.stderr + r.stdout.slice(-2000)).toBe(0);
      expect(ms).toBeGreaterThan(LIFETIME_S * 1000);
      // The expired token was refreshed at the start, and again once the first refreshed one ran out.
      expect(idp.refreshes).toBeGreaterThanOrEqual(2);
      expect(proxy.accepted).toBeGreaterThan(0);
      console.log(
        `wrap took ${(ms / 1000).toFixed(1)} s; token endpoint called ${idp.refreshes} times; proxy accepted ${proxy.accepted}, rejected ${proxy.rejected}`,
      );
    } finally {
      await proxy.close();
      await idp.close();
    }
  }, 600_000);
});
