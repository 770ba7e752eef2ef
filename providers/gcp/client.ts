/**
 * The GCP Compute API as the provider uses it: the clients (REST transport, proxies, optional local endpoint and
 * no-auth for the test fake), every call retried on throttling/unavailability and its errors mapped to
 * cni-rewind's (util.ts), and the wait for a zone/region/global operation.
 */
import {
  DisksClient,
  GlobalOperationsClient,
  InstancesClient,
  RegionDisksClient,
  RegionOperationsClient,
  SnapshotsClient,
  ZoneOperationsClient,
} from '@google-cloud/compute';
import {
  defaultRetryPolicy,
  EnvironmentError,
  envProxyAgent,
  type NodeTarget,
  type Reporter,
  type RetryPolicy,
  sleep,
  withRetry,
} from '../../src/provider-kit/index.js';
import { describeGcpError, diskRef, isRetryableGcpError } from './util.js';

export interface GcpProviderConfig {
  project?: string;
  guestFlush?: boolean;
  pollSeconds?: number;
  retryBudgetMs?: number;
  /** Test/private endpoints only: `http://127.0.0.1:PORT` (REST). */
  endpoint?: string;
  /** `none`: send no credentials (only for a local fake). Default: Application Default Credentials. */
  auth?: 'adc' | 'none';
}

/** The scopes the Compute clients ask for by default (used when cni-rewind makes the auth client itself). */
const GCP_SCOPES = ['https://www.googleapis.com/auth/compute', 'https://www.googleapis.com/auth/cloud-platform'];

interface Clients {
  instances: InstancesClient;
  disks: DisksClient;
  snapshots: SnapshotsClient;
  zoneOps: ZoneOperationsClient;
  globalOps: GlobalOperationsClient;
  regionDisks: RegionDisksClient;
  regionOps: RegionOperationsClient;
}

export class GcpApi {
  private clientsPromise?: Promise<Clients>;
  private readonly retry: RetryPolicy;
  throttled = 0;

  constructor(
    private readonly reporter: Reporter,
    private readonly config: GcpProviderConfig = {},
  ) {
    this.retry = { ...defaultRetryPolicy, initialDelayMs: 500, maxDelayMs: 20_000, maxElapsedMs: config.retryBudgetMs ?? 5 * 60_000 };
  }

  clients(): Promise<Clients> {
    this.clientsPromise ??= (async () => {
      const opts: Record<string, any> = {} as any;
      if (this.config.endpoint) {
        // The client always sets a port (default 443) and speaks TLS unless told `protocol: 'http'`.
        const u = new URL(this.config.endpoint);
        opts.apiEndpoint = u.hostname;
        opts.port = Number(u.port || (u.protocol === 'http:' ? 80 : 443));
        opts.protocol = u.protocol.replace(':', '');
      }
      // google-gax hands the transporter (gaxios) its own keep-alive agent, which turns off gaxios' proxy
      // support: a request interceptor puts a proxy-aware agent back when a proxy variable is set.
      const proxyAgent = envProxyAgent();
      if (this.config.auth === 'none' || proxyAgent) {
        const { GoogleAuth, PassThroughClient } = await import('google-auth-library');
        let authClient;
        try {
          authClient = this.config.auth === 'none' ? new PassThroughClient() : await new GoogleAuth({ scopes: GCP_SCOPES }).getClient();
        } catch (err) {
          throw describeGcpError('client initialization', err);
        }
        if (proxyAgent) authClient.transporter.interceptors.request.add({ resolved: async (o) => Object.assign(o, { agent: proxyAgent }) });
        opts.authClient = authClient;
      }
      const c: Clients = {
        instances: new InstancesClient(opts as any),
        disks: new DisksClient(opts as any),
        snapshots: new SnapshotsClient(opts as any),
        zoneOps: new ZoneOperationsClient(opts as any),
        globalOps: new GlobalOperationsClient(opts as any),
        regionDisks: new RegionDisksClient(opts as any),
        regionOps: new RegionOperationsClient(opts as any),
      };
      // Auth errors surface here once instead of as an unhandled rejection later (which crashes Node 20).
      try {
        await Promise.all(Object.values(c).map((x: { initialize(): Promise<unknown> }) => x.initialize()));
      } catch (err) {
        throw describeGcpError('client initialization', err);
      }
      return c;
    })();
    this.clientsPromise.catch(() => (this.clientsPromise = undefined));
    return this.clientsPromise;
  }

  async call<T>(op: string, fn: (c: Clients) => Promise<T>): Promise<T> {
    const c = await this.clients();
    try {
      return await withRetry(
        () => fn(c),
        isRetryableGcpError,
        this.retry,
        (err, attempt, delay) => {
          this.throttled++;
          this.reporter.debug('CNR_GCP_RETRY', `GCP ${op} throttled or unavailable (${(err as any)?.code}), retry ${attempt + 1} in ${delay} ms`);
        },
      );
    } catch (err) {
      throw describeGcpError(op, err);
    }
  }

  /** v6 methods resolve to [operation]; the Operation itself is in `latestResponse` (`.promise()` does not exist). */
  opName(res: unknown): string {
    const first = Array.isArray(res) ? res[0] : res;
    const op = (first as any)?.latestResponse ?? first;
    const name = op?.name;
    if (!name) throw new EnvironmentError('GCP: the API returned no operation');
    return String(name);
  }

  /** Loop on operations.wait until DONE (wait returns early, at most after ~2 min), then fail on op.error. */
  async waitOperation(what: string, project: string, zone: string | { region: string } | undefined, name: string, timeoutMs = 30 * 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const [op] =
        typeof zone === 'object'
          ? await this.call(`wait ${what}`, (c) => c.regionOps.wait({ project, region: zone.region, operation: name }))
          : zone
            ? await this.call(`wait ${what}`, (c) => c.zoneOps.wait({ project, zone, operation: name }))
            : await this.call(`wait ${what}`, (c) => c.globalOps.wait({ project, operation: name }));
      if (String(op.status) === 'DONE') {
        const errs = op.error?.errors ?? [];
        if (errs.length) throw new EnvironmentError(`GCP ${what} failed: ${errs.map((e) => `${e.code}: ${e.message}`).join('; ')}`);
        return;
      }
      if (Date.now() > deadline) throw new EnvironmentError(`GCP ${what}: operation ${name} not done after ${Math.round(timeoutMs / 1000)} s`);
      await sleep(250);
    }
  }

  async getInstance(t: NodeTarget) {
    const [inst] = await this.call('instances.get', (c) => c.instances.get({ project: t.location.project!, zone: t.location.zone!, instance: t.machine }));
    return inst;
  }

  /** A zonal or a regional persistent disk, through the API of its scope (a regional PD is not found as zonal). */
  async getDisk(project: string, zone: string, source: string | null | undefined) {
    const ref = diskRef(source);
    const [info] = ref.region
      ? await this.call('regionDisks.get', (c) => c.regionDisks.get({ project: ref.project ?? project, region: ref.region!, disk: ref.disk }))
      : await this.call('disks.get', (c) => c.disks.get({ project: ref.project ?? project, zone: ref.zone ?? zone, disk: ref.disk }));
    return { ref, info };
  }

  async close(): Promise<void> {
    const c = await this.clientsPromise?.catch(() => undefined);
    if (c) await Promise.all(Object.values(c).map((x: { close(): Promise<void> }) => x.close().catch(() => undefined)));
  }
}
