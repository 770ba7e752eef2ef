/**
 * EC2 as the AWS provider uses it: one client per region (through HTTPS_PROXY & co. when set), every call
 * retried on throttling with cni-rewind's backoff and its errors mapped to one clear line (errors.ts), and the
 * Describe* calls the provider's parts share.
 */
import {
  DescribeInstancesCommand,
  DescribeSnapshotsCommand,
  DescribeVolumesCommand,
  EC2Client,
  type Instance,
  type Snapshot,
  type Tag,
  type Volume,
} from '@aws-sdk/client-ec2';
import {
  defaultRetryPolicy,
  EnvironmentError,
  envProxyAgent,
  type EnvProxyAgent,
  type Reporter,
  type RetryPolicy,
  TAG_KEYS,
  withRetry,
} from '../../src/provider-kit/index.js';
import { describeAwsError, isRetryableAwsError } from './errors.js';

/** Extra tags this provider adds so `snapshots list` can rebuild a full record from the snapshot alone. */
export const AWS_TAGS = {
  machine: 'cni-rewind/machine',
  device: 'cni-rewind/device',
  boot: 'cni-rewind/boot',
  replacedBy: 'cni-rewind/replaced-by-run',
  restoredBy: 'cni-rewind/restored-by-run',
} as const;

export interface AwsProviderConfig {
  /** Regions searched by `snapshots list|delete` besides AWS_REGION and the regions of resolved nodes. */
  regions?: string[];
  /** How the root volume is restored: CreateReplaceRootVolumeTask (default), a stop/detach/attach swap, or not at all. */
  rootRestore?: 'replace-root-task' | 'swap' | 'skip';
  /** Seconds between waiter polls (SDK waiters default 15). */
  pollSeconds?: number;
  /** Total time budget for retrying one throttled call (ms). */
  retryBudgetMs?: number;
}

export const tagsOf = (tags: Tag[] | undefined): Record<string, string> => Object.fromEntries((tags ?? []).map((t) => [t.Key ?? '', t.Value ?? '']));
export const toTags = (m: Record<string, string>): Tag[] => Object.entries(m).map(([Key, Value]) => ({ Key, Value }));

/** The snapshots an earlier attempt of this backup made of this node (found by the tags it gave them). */
export async function snapshotsTagged(c: EC2Client, bundleId: string, node: string): Promise<Snapshot[]> {
  const r = await c.send(
    new DescribeSnapshotsCommand({
      OwnerIds: ['self'],
      Filters: [
        { Name: `tag:${TAG_KEYS.bundle}`, Values: [bundleId] },
        { Name: `tag:${TAG_KEYS.node}`, Values: [node] },
      ],
    }),
  );
  return r.Snapshots ?? [];
}

export class AwsApi {
  private readonly clients = new Map<string, EC2Client>();
  private readonly retry: RetryPolicy;
  private proxyAgent?: EnvProxyAgent;
  /** Throttled calls retried (for progress and the fan-out benchmark). */
  throttled = 0;

  constructor(
    private readonly reporter: Reporter,
    readonly config: AwsProviderConfig = {},
  ) {
    this.retry = { ...defaultRetryPolicy, initialDelayMs: 500, maxDelayMs: 20_000, maxElapsedMs: config.retryBudgetMs ?? 5 * 60_000 };
  }

  client(region: string): EC2Client {
    let c = this.clients.get(region);
    if (!c) {
      // maxAttempts 1: retries are ours (withRetry), so throttling is counted and bounded the same way everywhere.
      // With HTTPS_PROXY & co. set, requests go through the proxy (NO_PROXY honoured per request).
      this.proxyAgent ??= envProxyAgent();
      c = new EC2Client({
        region,
        maxAttempts: 1,
        ...(this.proxyAgent ? { requestHandler: { httpAgent: this.proxyAgent, httpsAgent: this.proxyAgent } } : {}),
      });
      this.clients.set(region, c);
    }
    return c;
  }

  /** One EC2 call with throttling retries and errors mapped to one clear line. */
  async call<T>(region: string, op: string, fn: (c: EC2Client) => Promise<T>): Promise<T> {
    try {
      return await withRetry(
        () => fn(this.client(region)),
        isRetryableAwsError,
        this.retry,
        (err, attempt, delay) => {
          this.throttled++;
          this.reporter.debug('CNR_AWS_RETRY', `AWS ${op} throttled or unavailable (${(err as Error)?.name}), retry ${attempt + 1} in ${delay} ms`);
        },
      );
    } catch (err) {
      throw describeAwsError(op, err);
    }
  }

  pollDelays(): { minDelay: number; maxDelay: number } {
    const s = Math.max(1, this.config.pollSeconds ?? 15);
    return { minDelay: s, maxDelay: Math.max(s, 120) };
  }

  async describeInstance(region: string, instanceId: string): Promise<Instance> {
    const out = await this.call(region, 'DescribeInstances', (c) => c.send(new DescribeInstancesCommand({ InstanceIds: [instanceId] })));
    const inst = out.Reservations?.flatMap((r) => r.Instances ?? [])[0];
    if (!inst) throw new EnvironmentError(`AWS instance ${instanceId} not found in ${region}`);
    return inst;
  }

  async describeVolumes(region: string, ids: string[]): Promise<Map<string, Volume>> {
    if (!ids.length) return new Map();
    const out = await this.call(region, 'DescribeVolumes', (c) => c.send(new DescribeVolumesCommand({ VolumeIds: ids })));
    return new Map((out.Volumes ?? []).map((v) => [v.VolumeId!, v]));
  }

  async describeSnapshots(region: string, ids: string[]): Promise<Map<string, Snapshot>> {
    const out = new Map<string, Snapshot>();
    for (let i = 0; i < ids.length; i += 200) {
      const chunk = ids.slice(i, i + 200);
      const r = await this.call(region, 'DescribeSnapshots', (c) => c.send(new DescribeSnapshotsCommand({ SnapshotIds: chunk }))).catch((err) => {
        // One deleted id makes the whole call fail with InvalidSnapshot.NotFound: fall back to one at a time.
        if (/InvalidSnapshot\.NotFound/.test(String((err as any)?.cause?.name ?? err))) return undefined;
        throw err;
      });
      if (r) for (const s of r.Snapshots ?? []) out.set(s.SnapshotId!, s);
      else
        for (const id of chunk) {
          const one = await this.call(region, 'DescribeSnapshots', (c) => c.send(new DescribeSnapshotsCommand({ SnapshotIds: [id] }))).catch(() => undefined);
          for (const s of one?.Snapshots ?? []) out.set(s.SnapshotId!, s);
        }
    }
    return out;
  }

  close(): void {
    for (const c of this.clients.values()) c.destroy();
    this.clients.clear();
    this.proxyAgent?.destroy();
  }
}
