import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Reporter, silentHost } from '../../src/io/host.js';
import type { NodeTarget, SnapshotRecord } from '../../src/provider-kit/types.js';
import { startEc2StandIn, type Ec2StandIn } from '../../test/support/ec2-standin.js';
import { AwsProvider } from './index.js';

/**
 * Waiting for many nodes' snapshots against the EC2 stand-in (test/support/ec2-standin.ts: latency, snapshots
 * pending for a while, throttling): the waits of all nodes share one DescribeSnapshots poller per region.
 */
const NODES = 30;
let ec2: Ec2StandIn;
const saved = { ...process.env };

beforeAll(async () => {
  ec2 = await startEc2StandIn({ latencyMs: 20, pendingMs: 2500 });
  Object.assign(process.env, {
    AWS_ENDPOINT_URL_EC2: ec2.url,
    AWS_ACCESS_KEY_ID: 'testing',
    AWS_SECRET_ACCESS_KEY: 'testing',
    AWS_REGION: 'us-east-1',
    AWS_EC2_METADATA_DISABLED: 'true',
  });
});
afterAll(async () => {
  for (const k of ['AWS_ENDPOINT_URL_EC2', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_REGION', 'AWS_EC2_METADATA_DISABLED']) {
    if (saved[k] === undefined) delete process.env[k];
    else process.env[k] = saved[k];
  }
  await ec2?.close();
});

async function snapshotNodes(aws: AwsProvider, count: number): Promise<SnapshotRecord[][]> {
  const targets: NodeTarget[] = ec2
    .addInstances(count)
    .map((id, i) => ({ node: `n${i}`, provider: 'aws', machine: id, location: { region: 'us-east-1', zone: 'us-east-1a' } }));
  return Promise.all(targets.map((t) => aws.snapshot(t, { bundleId: 'b1', clusterId: 'c1', node: t.node })));
}

describe('aws waitUsable across nodes (EC2 stand-in)', () => {
  it(`polls DescribeSnapshots for all ${NODES} nodes together, not once per node`, async () => {
    const aws = new AwsProvider({ reporter: new Reporter(silentHost), config: {} }, { pollSeconds: 1 });
    try {
      const perNode = await snapshotNodes(aws, NODES);
      expect(perNode.flat().every((r) => r.state === 'pending')).toBe(true);
      ec2.resetCounters();
      const t0 = Date.now();
      const done = await Promise.all(perNode.map((recs) => aws.waitUsable(recs, { timeoutMs: 30_000 })));
      expect(done.flat()).toHaveLength(NODES * 2);
      expect(done.flat().every((r) => r.state === 'completed')).toBe(true);
      // About one poll per second until the 2.5 s pending time is over: a handful, whatever the number of nodes.
      const seconds = (Date.now() - t0) / 1000;
      expect(ec2.calls.DescribeSnapshots ?? 0).toBeLessThanOrEqual(Math.ceil(seconds) + 2);
      expect(aws.waitPolls).toBe(ec2.calls.DescribeSnapshots);
    } finally {
      await aws.close();
    }
  });

  it('still reports the snapshots pending at the deadline, with their records', async () => {
    const aws = new AwsProvider({ reporter: new Reporter(silentHost), config: {} }, { pollSeconds: 1 });
    try {
      const [recs] = await snapshotNodes(aws, 1);
      const err = await aws.waitUsable(recs!, { timeoutMs: 500 }).then(
        () => undefined,
        (e: unknown) => e as Error & { records?: SnapshotRecord[] },
      );
      expect(err?.message).toMatch(/still pending after/);
      expect(err?.records?.map((r) => r.state)).toEqual(['pending', 'pending']);
    } finally {
      await aws.close();
    }
  });
});
