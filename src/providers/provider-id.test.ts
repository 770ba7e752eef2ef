import { describe, expect, it } from 'vitest';
import { parseProviderId } from './provider-id.js';

describe('parseProviderId', () => {
  it('reads AWS ids with their zone (the region comes from EC2, see providers/aws)', () => {
    expect(parseProviderId('aws:///us-east-1a/i-0abc123')).toEqual({ provider: 'aws', zone: 'us-east-1a', instanceId: 'i-0abc123' });
    expect(parseProviderId('aws:///us-west-2-lax-1a/i-0123456789abcdef0')).toEqual({ provider: 'aws', zone: 'us-west-2-lax-1a', instanceId: 'i-0123456789abcdef0' });
  });
  it('reads GCE ids', () => {
    expect(parseProviderId('gce://proj-1/europe-west1-b/node-a')).toEqual({ provider: 'gcp', project: 'proj-1', zone: 'europe-west1-b', instance: 'node-a' });
  });
  it('says unknown for anything else', () => {
    expect(parseProviderId(undefined)).toEqual({ provider: 'unknown' });
    expect(parseProviderId('kind://docker/kind/kind-control-plane')).toEqual({ provider: 'unknown', raw: 'kind://docker/kind/kind-control-plane' });
    expect(parseProviderId('aws:///us-east-1a/not-an-instance')).toMatchObject({ provider: 'unknown' });
  });
});
