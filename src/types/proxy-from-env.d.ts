// proxy-from-env 2.x ships no type declarations.
declare module 'proxy-from-env' {
  /** The proxy URL for `url` from HTTPS_PROXY/HTTP_PROXY/ALL_PROXY (any case), or '' when none or NO_PROXY matches. */
  export function getProxyForUrl(url: string | URL): string;
}
