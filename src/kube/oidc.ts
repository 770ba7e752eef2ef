/**
 * The OIDC refresh behind `auth-provider: oidc`. @kubernetes/client-node's authenticator (1.3 and 1.4) keeps the
 * id-token, decides when it expired and writes the new tokens into the user's config, but the client it refreshes
 * with cannot work: it passes the issuer URL to openid-client 6's discovery() as a string, which throws
 * `"server" must be an instance of URL` (kubernetes-client/javascript#2202), and it records the token's remaining
 * seconds (`expiresIn()`) as if they were its absolute expiry. Only that client is replaced here, on the library's
 * own authenticator instance; the caching and the refresh decision stay the library's.
 */
import type { User } from '@kubernetes/client-node';

interface LibraryOidcClient {
  refresh(refreshToken: string): Promise<{ id_token?: string; refresh_token?: string; expires_at?: number }>;
}

export interface LibraryOidcAuthenticator {
  currentTokenExpiration: number;
  getClient?: (user: User) => Promise<LibraryOidcClient>;
}

export function useWorkingOidcClient(auth: LibraryOidcAuthenticator | undefined): void {
  if (!auth || (auth.getClient as { fixed?: boolean } | undefined)?.fixed) return;
  const getClient = async (user: User): Promise<LibraryOidcClient> => {
    const oidc = await import('openid-client');
    const cfg = user.authProvider?.config ?? {};
    // A public client (no secret) authenticates with its client_id alone, as kubectl does.
    const config = await oidc.discovery(new URL(cfg['idp-issuer-url']), cfg['client-id'], cfg['client-secret'] || undefined);
    return {
      async refresh(refreshToken) {
        const t = await oidc.refreshTokenGrant(config, refreshToken);
        const expiresIn = t.expiresIn();
        return {
          id_token: t.id_token,
          // An issuer that does not rotate refresh tokens sends none back: the old one stays valid.
          refresh_token: t.refresh_token ?? refreshToken,
          // Absolute seconds, as the library compares it with Date.now() / 1000.
          expires_at: t.claims()?.exp ?? (expiresIn !== undefined ? Math.floor(Date.now() / 1000) + expiresIn : undefined),
        };
      },
    };
  };
  auth.getClient = Object.assign(getClient, { fixed: true });
}
