/**
 * The provider kit: everything a snapshot provider may import besides its SDK and Node's built-ins. Built-in
 * providers (providers/<name>/) and third-party ones (`import ... from 'cni-rewind/provider'`) use this module
 * only, so the engine can move its internals without breaking them.
 *
 * - the contract: SnapshotProvider, ProviderModule, NodeTarget, SnapshotRecord, ... and PROVIDER_API_VERSION;
 * - the errors a provider throws (branded, so the CLI maps them to their exit code even when they come from
 *   another copy of this package) and `isCniRewindError` to recognise them;
 * - retry with backoff and sleep, proxies from the environment, provider-id parsing, `registerSecret`;
 * - helpers shared by providers: snapshot deletion/usability checks, tags in hypervisor snapshot descriptions,
 *   an HTTPS client with the TLS options hypervisor APIs need.
 */
export * from './types.js';
export {
  BadInputError,
  CniRewindError,
  EnvironmentError,
  ERROR_BRAND,
  errorMessage,
  ExitCode,
  isCniRewindError,
  isErrorKind,
  PartialFailureError,
  RefusedError,
  type BrandedError,
  type ErrorKind,
} from '../core/errors.js';
export { defaultRetryPolicy, sleep, withRetry, type RetryPolicy } from '../util/retry.js';
export { envProxyAgent, type EnvProxyAgent } from './proxy.js';
export { parseProviderId, type ProviderIdInfo } from './provider-id.js';
export { registerSecret } from '../io/redact.js';
export type { IoHost, IoMessage, Level, ProgressUpdate, Reporter } from '../io/host.js';
export { deleteEach, FLAT_TAG_KEYS, throwUnlessUsable } from './snapshot-helpers.js';
export { describeTags, diskSnapshotId, hypervisorSnapshot, matchesFilter, parseTags, snapshotName } from './tags.js';
export { HttpClient, isTransient, type HttpResponse, type TlsOptions } from './https.js';
