declare module 'proxy-from-env' {
  /** The proxy URL that HTTPS_PROXY/HTTP_PROXY/ALL_PROXY and NO_PROXY select for `url`, or '' for none. */
  export function getProxyForUrl(url: string | URL): string;
}
