/**
 * A FAKE OIDC issuer on 127.0.0.1 (no emulator of an identity provider exists here): HTTPS with the certificate it
 * is given, `<issuer>/.well-known/openid-configuration` and a token endpoint that answers the refresh-token grant
 * with a new RS256 id-token (valid `lifetimeSeconds`) and a rotated refresh token. Only the latest refresh token is
 * accepted, as issuers that rotate them do. `verify` is what a token-validating proxy checks: signature, issuer,
 * audience, expiry.
 */
import { createSign, createVerify, generateKeyPairSync, randomBytes } from 'node:crypto';
import https from 'node:https';
import type { AddressInfo } from 'node:net';

export interface FakeOidcIssuer {
  issuer: string;
  clientId: string;
  /** Refresh-token grants answered. */
  refreshes: number;
  /** The refresh token the next grant must present. */
  refreshToken: string;
  /** An id-token that expired `agoSeconds` ago (what a kubeconfig holds after a night). */
  expiredIdToken(agoSeconds?: number): string;
  verify(token: string): boolean;
  close(): Promise<void>;
}

const b64u = (x: Buffer | string) => Buffer.from(x).toString('base64url');

export async function startFakeOidcIssuer(tls: { cert: Buffer; key: Buffer }, opts: { lifetimeSeconds: number; clientId?: string }): Promise<FakeOidcIssuer> {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const clientId = opts.clientId ?? 'cni-rewind-test';
  let issuer = '';
  const sign = (iat: number, exp: number) => {
    const head = b64u(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid: 'k1' }));
    const body = b64u(JSON.stringify({ iss: issuer, aud: clientId, sub: 'oidc-user', iat, exp }));
    return `${head}.${body}.${createSign('RSA-SHA256').update(`${head}.${body}`).sign(privateKey).toString('base64url')}`;
  };
  const state = { refreshes: 0, refreshToken: randomBytes(12).toString('hex') };
  const json = (res: import('node:http').ServerResponse, status: number, body: object) => {
    res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
    res.end(JSON.stringify(body));
  };
  const server = https.createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', issuer);
      if (req.method === 'GET' && url.pathname === '/oidc/.well-known/openid-configuration') {
        return json(res, 200, {
          issuer,
          token_endpoint: `${issuer}/token`,
          authorization_endpoint: `${issuer}/auth`,
          jwks_uri: `${issuer}/jwks`,
          response_types_supported: ['code'],
          subject_types_supported: ['public'],
          id_token_signing_alg_values_supported: ['RS256'],
          grant_types_supported: ['refresh_token'],
          token_endpoint_auth_methods_supported: ['none', 'client_secret_post', 'client_secret_basic'],
        });
      }
      if (req.method === 'POST' && url.pathname === '/oidc/token') {
        const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
        if (form.get('grant_type') !== 'refresh_token' || form.get('refresh_token') !== state.refreshToken) return json(res, 400, { error: 'invalid_grant' });
        state.refreshes++;
        state.refreshToken = randomBytes(12).toString('hex');
        const now = Math.floor(Date.now() / 1000);
        return json(res, 200, {
          access_token: randomBytes(12).toString('hex'),
          token_type: 'Bearer',
          expires_in: opts.lifetimeSeconds,
          id_token: sign(now, now + opts.lifetimeSeconds),
          refresh_token: state.refreshToken,
        });
      }
      json(res, 404, { error: 'not_found' });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  issuer = `https://127.0.0.1:${(server.address() as AddressInfo).port}/oidc`;
  return {
    issuer,
    clientId,
    get refreshes() {
      return state.refreshes;
    },
    get refreshToken() {
      return state.refreshToken;
    },
    expiredIdToken: (agoSeconds = 60) => {
      const now = Math.floor(Date.now() / 1000);
      return sign(now - agoSeconds - opts.lifetimeSeconds, now - agoSeconds);
    },
    verify(token) {
      const [head, body, sig] = token.split('.');
      if (!head || !body || !sig) return false;
      if (!createVerify('RSA-SHA256').update(`${head}.${body}`).verify(publicKey, Buffer.from(sig, 'base64url'))) return false;
      const claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
      return claims.iss === issuer && claims.aud === clientId && claims.exp * 1000 > Date.now();
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
