/** EC2 error classification and zone names for the AWS provider (providers/aws/index.ts). */
import { EnvironmentError } from '../../src/provider-kit/index.js';

const THROTTLE_CODES = new Set([
  'RequestLimitExceeded',
  'Throttling',
  'ThrottlingException',
  'RequestThrottled',
  'TooManyRequestsException',
  'SnapshotCreationPerVolumeRateExceeded',
  'ServiceUnavailable',
  'Unavailable',
  'InternalError',
]);
const TRANSIENT_STATUSES = new Set([429, 500, 502, 503, 504]);
const TIMEOUT_NAMES = new Set(['TimeoutError', 'RequestTimeout', 'RequestTimeoutException']);
const PERMISSION_CODES = new Set([
  'UnauthorizedOperation',
  'AuthFailure',
  'InvalidClientTokenId',
  'SignatureDoesNotMatch',
  'OptInRequired',
  'ExpiredToken',
  'InvalidToken',
]);

/**
 * Throttling and transient server errors are retried; everything else fails at once. The transient statuses are
 * the SDK's own (500, 502, 503, 504: a load balancer in front of EC2, or a proxy, answers 502/504 with no EC2 error
 * body), and a connection cut or timed out mid-call. A retried call may have been done the first time: calls that
 * create something carry a ClientToken, and CreateSnapshots, which has none, looks for its snapshots first.
 */
export function isRetryableAwsError(err: unknown): { retry: boolean; afterMs?: number } {
  const e = err as { name?: string; Code?: string; code?: string; $metadata?: { httpStatusCode?: number }; $retryable?: { throttling?: boolean } };
  const code = e?.name ?? e?.Code;
  if (code && THROTTLE_CODES.has(code)) return { retry: true };
  if (e?.$retryable?.throttling) return { retry: true };
  const status = e?.$metadata?.httpStatusCode;
  if (status !== undefined && TRANSIENT_STATUSES.has(status)) return { retry: true };
  if (code && TIMEOUT_NAMES.has(code)) return { retry: true };
  if (e?.code === 'ECONNRESET' || e?.code === 'EPIPE' || e?.code === 'ETIMEDOUT') return { retry: true };
  return { retry: false };
}

/** Turn SDK errors into cni-rewind errors with one clear line (credentials, permissions, unreachable endpoint). */
export function describeAwsError(op: string, err: unknown): Error {
  const e = err as { name?: string; message?: string; code?: string; $metadata?: { httpStatusCode?: number } };
  const name = e?.name ?? 'Error';
  if (name === 'CredentialsProviderError' || /Could not load credentials/i.test(e?.message ?? '')) {
    return new EnvironmentError(`AWS ${op}: no AWS credentials found`, {
      hint: 'set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or run where an instance role is available',
      cause: err,
    });
  }
  if (PERMISSION_CODES.has(name))
    return new EnvironmentError(`AWS ${op}: permission denied (${name}): ${e.message}`, {
      hint: 'see examples/iam-policy-aws.json for the permissions cni-rewind needs',
      cause: err,
    });
  const net = e?.code ?? (err as any)?.cause?.code;
  if (net === 'ECONNREFUSED' || net === 'ENOTFOUND' || net === 'EHOSTUNREACH' || net === 'ETIMEDOUT') {
    return new EnvironmentError(`AWS ${op}: cannot reach the EC2 endpoint (${net})`, {
      hint: 'check AWS_REGION / AWS_ENDPOINT_URL_EC2 and the network',
      cause: err,
    });
  }
  const status = e?.$metadata?.httpStatusCode;
  return new EnvironmentError(`AWS ${op} failed: ${name}${status ? ` (HTTP ${status})` : ''}: ${e?.message ?? String(err)}`, { cause: err });
}

/**
 * The region name a zone name starts with: `us-east-1a`, `us-west-2-lax-1a` (Local Zone) and
 * `us-east-1-wl1-bos-wlz-1` (Wavelength) all start with theirs. Only a candidate: EC2 confirms it (regionOf).
 */
export function regionPrefix(zone: string): string | undefined {
  return /^([a-z]{2}(?:-gov|-iso[a-z]?)?-[a-z]+-\d+)/.exec(zone)?.[1];
}
