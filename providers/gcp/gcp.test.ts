import { describe, expect, it } from 'vitest';
import { ExitCode } from '../../src/provider-kit/index.js';
import { defaultGcpProject, listQuery, recordFromSnapshot, resolveGcpTarget, snapshotLabels } from './records.js';
import { describeGcpError, descriptionTags, diskRef, isNotFound, isRetryableGcpError, labelValue, resourceName } from './util.js';

const node = (name: string, providerID?: string) => ({ name, providerID, labels: {}, annotations: {} });

describe('GCP naming and labels', () => {
  it('label values are lowercase [a-z0-9_-], at most 63 characters', () => {
    expect(labelValue('Prod-20261202T120000Z')).toBe('prod-20261202t120000z');
    expect(labelValue('a.b/c d')).toBe('a_b_c_d');
    expect(labelValue('x'.repeat(80))).toHaveLength(63);
  });

  it('resource names start with a letter, fit 63 characters and get a random suffix', () => {
    const a = resourceName('cnr', '1-Node.Example', 'persistent-disk-0');
    expect(a).toMatch(/^cnr-1-node-example-persistent-disk-0-[0-9a-f]{6}$/);
    expect(resourceName('9', 'x'.repeat(100))).toMatch(/^x+-[0-9a-f]{6}$/);
    expect(resourceName('9', 'x'.repeat(100)).length).toBeLessThanOrEqual(63);
    expect(resourceName('---')).toMatch(/^cnr-[0-9a-f]{6}$/);
    expect(resourceName('a')).not.toBe(resourceName('a'));
  });

  it('reads the PD CSI JSON in a disk description as tags, and nothing else', () => {
    expect(descriptionTags('{"kubernetes.io/created-for/pv/name":"pvc-1","n":3}')).toEqual({ 'kubernetes.io/created-for/pv/name': 'pvc-1' });
    expect(descriptionTags('a plain description')).toEqual({});
    expect(descriptionTags('[1,2]')).toEqual({});
    expect(descriptionTags(undefined)).toEqual({});
  });

  it('tells zonal from regional disks by their path', () => {
    expect(diskRef('https://compute.googleapis.com/compute/v1/projects/p1/zones/europe-west1-b/disks/d1')).toEqual({
      project: 'p1',
      zone: 'europe-west1-b',
      disk: 'd1',
    });
    expect(diskRef('projects/p1/regions/europe-west1/disks/rd')).toEqual({ project: 'p1', region: 'europe-west1', disk: 'rd' });
    expect(diskRef('just-a-name')).toEqual({ disk: 'just-a-name' });
  });
});

describe('GCP error classification', () => {
  it('retries throttling and unavailability (HTTP and gRPC codes), not client errors', () => {
    for (const code of [429, 503, 8, 14]) expect(isRetryableGcpError({ code }).retry, String(code)).toBe(true);
    for (const code of [400, 403, 404, 5, 7]) expect(isRetryableGcpError({ code }).retry, String(code)).toBe(false);
    expect(isRetryableGcpError(new Error('no code')).retry).toBe(false);
  });

  it('not found is 404 or NOT_FOUND (5), also when wrapped as a cause', () => {
    expect(isNotFound({ code: 404 })).toBe(true);
    expect(isNotFound({ code: 5 })).toBe(true);
    expect(isNotFound(describeGcpError('snapshots.get', Object.assign(new Error('gone'), { code: 404 })))).toBe(true);
    expect(isNotFound({ code: 403 })).toBe(false);
  });

  it('maps credentials, permission and connection errors to environment errors (exit 4) with their hint', () => {
    const creds = describeGcpError('instances.get', new Error('Could not load the default credentials. Browse to ...'));
    expect(creds).toMatchObject({
      exitCode: ExitCode.Environment,
      message: expect.stringMatching(/^GCP instances.get: no usable Application Default Credentials/),
      hint: expect.stringMatching(/gcloud auth application-default login/),
    });
    const denied = describeGcpError('disks.createSnapshot', Object.assign(new Error('Required permission compute.disks.createSnapshot'), { code: 403 }));
    expect(denied).toMatchObject({
      exitCode: ExitCode.Environment,
      message: 'GCP disks.createSnapshot: permission denied: Required permission compute.disks.createSnapshot',
      hint: expect.stringMatching(/gcp-roles.md/),
    });
    expect(describeGcpError('x', new Error('connect ECONNREFUSED 127.0.0.1:1')).message).toBe(
      'GCP x: cannot reach the Compute API (connect ECONNREFUSED 127.0.0.1:1)',
    );
    expect(describeGcpError('x', Object.assign(new Error('boom\nstack'), { code: 500 })).message).toBe('GCP x failed (500): boom');
  });

  it('passes an error that is already a cni-rewind error through unchanged', () => {
    const once = describeGcpError('a', Object.assign(new Error('denied'), { code: 403 }));
    expect(describeGcpError('b', once)).toBe(once);
  });
});

describe('GCP node resolution and snapshot records', () => {
  it('finds the instance from the providerID, the mapping entry winning, the default project last', () => {
    expect(resolveGcpTarget(node('n1', 'gce://p1/europe-west1-b/vm-1'), undefined, 'other')).toEqual({
      node: 'n1',
      provider: 'gcp',
      machine: 'vm-1',
      location: { project: 'p1', zone: 'europe-west1-b' },
    });
    expect(resolveGcpTarget(node('n1', 'gce://p1/europe-west1-b/vm-1'), { instance: 'vm-2', zone: 'us-east1-c' }, undefined)).toMatchObject({
      machine: 'vm-2',
      location: { project: 'p1', zone: 'us-east1-c' },
    });
    expect(resolveGcpTarget(node('n2'), { instance: 'vm-3', zone: 'z' }, 'dflt')).toMatchObject({ location: { project: 'dflt', zone: 'z' } });
    expect(resolveGcpTarget(node('n3', 'aws:///us-east-1a/i-0abc'), undefined, 'p')).toBeUndefined();
    expect(() => resolveGcpTarget(node('n4'), { instance: 'vm-4' }, 'p')).toThrow(/node n4: GCP project and zone unknown/);
  });

  it('the default project comes from the config, then GOOGLE_CLOUD_PROJECT, then CLOUDSDK_CORE_PROJECT', () => {
    expect(defaultGcpProject('cfg', { GOOGLE_CLOUD_PROJECT: 'g' })).toBe('cfg');
    expect(defaultGcpProject(undefined, { GOOGLE_CLOUD_PROJECT: 'g', CLOUDSDK_CORE_PROJECT: 's' })).toBe('g');
    expect(defaultGcpProject(undefined, { CLOUDSDK_CORE_PROJECT: 's' })).toBe('s');
    expect(defaultGcpProject(undefined, {})).toBeUndefined();
  });

  it('a snapshot listed with the labels it was made with comes back as the same record', () => {
    const target = { node: 'Worker-1', provider: 'gcp', machine: 'vm-1', location: { project: 'p1', zone: 'z1' } };
    const labels = snapshotLabels(target, { bundleId: 'Prod-1', clusterId: 'uid-1', node: 'Worker-1' }, 'persistent-disk-0', true);
    const filter = { bundleId: 'Prod-1', clusterId: 'uid-1' };
    const { want, expr } = listQuery(filter);
    expect(expr).toBe('(labels.cni-rewind = "cni-rewind") AND (labels.cni-rewind-bundle-id = "prod-1") AND (labels.cni-rewind-cluster-id = "uid-1")');
    const listed = {
      name: 'cnr-worker-1-abc',
      labels,
      creationTimestamp: '2026-12-01T10:00:00Z',
      status: 'READY',
      sourceDisk: 'projects/p1/zones/z1/disks/vm-1-boot',
      diskSizeGb: '10',
    };
    expect(recordFromSnapshot(listed, 'p1', filter, want)).toEqual({
      provider: 'gcp',
      node: 'worker-1',
      machine: 'vm-1',
      disk: 'vm-1-boot',
      device: 'persistent-disk-0',
      boot: true,
      snapshotId: 'cnr-worker-1-abc',
      sizeGiB: 10,
      state: 'completed',
      created: '2026-12-01T10:00:00.000Z',
      location: { project: 'p1' },
      details: { bundleId: 'prod-1', clusterId: 'uid-1' },
    });
    expect(recordFromSnapshot({ ...listed, status: 'CREATING' }, 'p1', filter, want)?.state).toBe('pending');
    expect(recordFromSnapshot({ ...listed, status: 'FAILED' }, 'p1', filter, want)?.state).toBe('failed');
  });

  it('drops what the server-side filter let through: other labels, or not older than createdBefore', () => {
    const target = { node: 'n', provider: 'gcp', machine: 'm', location: {} };
    const labels = snapshotLabels(target, { bundleId: 'b1', clusterId: 'c', node: 'n' }, 'd', false);
    const listed = { name: 's', labels, creationTimestamp: '2026-12-01T10:00:00Z', status: 'READY' };
    expect(recordFromSnapshot(listed, 'p', { bundleId: 'b2' }, listQuery({ bundleId: 'b2' }).want)).toBeUndefined();
    expect(recordFromSnapshot({ ...listed, labels: {} }, 'p', {}, listQuery({}).want)).toBeUndefined();
    expect(recordFromSnapshot(listed, 'p', { createdBefore: new Date('2026-12-01T10:00:00Z') }, listQuery({}).want)).toBeUndefined();
    expect(recordFromSnapshot(listed, 'p', { createdBefore: new Date('2026-12-02') }, listQuery({}).want)?.snapshotId).toBe('s');
  });
});
