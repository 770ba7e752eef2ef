import { describe, expect, it } from 'vitest';
import { ExitCode } from '../../src/core/errors.js';
import { describeAwsError, isRetryableAwsError, regionPrefix } from './index.js';

describe('AWS error handling', () => {
  it('retries throttling and unavailability, not client errors', () => {
    expect(isRetryableAwsError({ name: 'RequestLimitExceeded' }).retry).toBe(true);
    expect(isRetryableAwsError({ name: 'Whatever', $metadata: { httpStatusCode: 503 } }).retry).toBe(true);
    expect(isRetryableAwsError({ name: 'Whatever', $metadata: { httpStatusCode: 429 } }).retry).toBe(true);
    expect(isRetryableAwsError({ name: 'InvalidInstanceID.NotFound', $metadata: { httpStatusCode: 400 } }).retry).toBe(false);
    expect(isRetryableAwsError({ name: 'UnauthorizedOperation', $metadata: { httpStatusCode: 403 } }).retry).toBe(false);
  });

  it('retries the transient statuses a proxy or load balancer answers with no EC2 error body, and timeouts', () => {
    for (const status of [500, 502, 504]) expect(isRetryableAwsError({ name: 'Unknown', $metadata: { httpStatusCode: status } }).retry).toBe(true);
    expect(isRetryableAwsError({ name: 'TimeoutError' }).retry).toBe(true);
    expect(isRetryableAwsError({ code: 'ETIMEDOUT' }).retry).toBe(true);
    expect(isRetryableAwsError({ name: 'Unknown', $metadata: { httpStatusCode: 501 } }).retry).toBe(false);
  });

  it('maps credentials and permission errors to environment errors (exit 4) with a hint', () => {
    const a = describeAwsError(
      'CreateSnapshots',
      Object.assign(new Error('Could not load credentials from any providers'), { name: 'CredentialsProviderError' }),
    ) as any;
    expect(a.exitCode).toBe(ExitCode.Environment);
    expect(a.message).toBe('AWS CreateSnapshots: no AWS credentials found');
    const b = describeAwsError('CreateSnapshots', Object.assign(new Error('You are not authorized'), { name: 'UnauthorizedOperation' })) as any;
    expect(b.message).toMatch(/permission denied/);
    expect(b.hint).toMatch(/iam-policy-aws.json/);
  });
});

describe('AWS zone names', () => {
  it('give the region they start with as the candidate EC2 confirms, for every zone kind', () => {
    expect(regionPrefix('us-east-1a')).toBe('us-east-1');
    expect(regionPrefix('us-west-2-lax-1a')).toBe('us-west-2');
    expect(regionPrefix('us-east-1-wl1-bos-wlz-1')).toBe('us-east-1');
    expect(regionPrefix('us-gov-west-1b')).toBe('us-gov-west-1');
    expect(regionPrefix('ap-southeast-2-per-1a')).toBe('ap-southeast-2');
    expect(regionPrefix('not-a-zone')).toBeUndefined();
  });
});
