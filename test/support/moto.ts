/**
 * The moto server (a real AWS EC2 emulator, `python3 -m moto.server`) on 127.0.0.1 for tests and benchmarks:
 * started on a free port, ready when GET /moto-api/ answers 200, reset with POST /moto-api/reset, killed by PID.
 * test/requirements.txt pins moto[server] for CI. A missing moto makes start() throw: tests fail loudly.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';

export interface Moto {
  url: string;
  port: number;
  pid: number;
  /** Env for the AWS SDK (standard variables only, as a user would set them). */
  env: Record<string, string>;
  reset(): Promise<void>;
  stop(): Promise<void>;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export async function startMoto(opts: { timeoutMs?: number } = {}): Promise<Moto> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  let log = '';
  const child: ChildProcess = spawn('python3', ['-m', 'moto.server', '-H', '127.0.0.1', '-p', String(port)], { stdio: ['ignore', 'pipe', 'pipe'] });
  const keep = (b: Buffer) => {
    log = (log + b.toString()).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  let exited: number | null | undefined;
  child.on('exit', (code) => (exited = code));
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  for (;;) {
    if (exited !== undefined)
      throw new Error(`moto server exited (code ${exited}) before it was ready; is moto[server] installed (pip install -r test/requirements.txt)?\n${log}`);
    try {
      const r = await fetch(`${url}/moto-api/`);
      if (r.status === 200) break;
    } catch {
      /* not listening yet */
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`moto server did not answer on ${url} within ${opts.timeoutMs ?? 60_000} ms\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  const pid = child.pid!;
  return {
    url,
    port,
    pid,
    env: {
      AWS_ACCESS_KEY_ID: 'testing',
      AWS_SECRET_ACCESS_KEY: 'testing',
      AWS_REGION: 'us-east-1',
      AWS_ENDPOINT_URL_EC2: url,
      AWS_EC2_METADATA_DISABLED: 'true',
    },
    async reset() {
      const r = await fetch(`${url}/moto-api/reset`, { method: 'POST' });
      if (r.status !== 200) throw new Error(`moto reset answered HTTP ${r.status}`);
    },
    async stop() {
      if (exited !== undefined) return;
      const gone = new Promise<void>((r) => child.once('exit', () => r()));
      process.kill(pid, 'SIGTERM');
      const t = setTimeout(() => exited === undefined && process.kill(pid, 'SIGKILL'), 5000);
      await gone;
      clearTimeout(t);
    },
  };
}

export interface ThrottlingProxy {
  url: string;
  /** Requests answered with RequestLimitExceeded so far. */
  throttled: number;
  forwarded: number;
  /** Requests done by moto whose answer was replaced by a 502 (loseAnswer). */
  lost: number;
  close(): Promise<void>;
}

type IncomingMessage = import('node:http').IncomingMessage;
type ServerResponse = import('node:http').ServerResponse;

/** Pass one request on to moto unchanged and copy its answer back. */
export async function forward(target: string, req: IncomingMessage, res: ServerResponse, body: Buffer): Promise<void> {
  try {
    const r = await relay(target, req, body);
    res.writeHead(r.status, { 'content-type': r.contentType, 'content-length': r.body.length });
    res.end(r.body);
  } catch (err) {
    res.writeHead(502);
    res.end(String(err));
  }
}

/** Send one proxied request on to `target` and read its whole answer. */
async function relay(target: string, req: IncomingMessage, body: Buffer): Promise<{ status: number; contentType: string; body: Buffer }> {
  const headers = Object.fromEntries(
    Object.entries(req.headers).filter(([k]) => !['host', 'connection', 'content-length', 'transfer-encoding'].includes(k)),
  ) as Record<string, string>;
  const r = await fetch(target + (req.url ?? '/'), { method: req.method, headers, body: body.length ? body : undefined });
  return { status: r.status, contentType: r.headers.get('content-type') ?? 'text/xml', body: Buffer.from(await r.arrayBuffer()) };
}

/** An error answer in EC2's query-protocol XML (what the SDK parses into an error named after `code`). */
export function ec2Error(res: ServerResponse, status: number, code: string, message: string): void {
  const esc = (x: string) => x.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const xml = `<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>${esc(code)}</Code><Message>${esc(message)}</Message></Error></Errors><RequestID>00000000-0000-0000-0000-000000000000</RequestID></Response>`;
  res.writeHead(status, { 'content-type': 'text/xml;charset=UTF-8', 'content-length': Buffer.byteLength(xml) });
  res.end(xml);
}

/**
 * An HTTP server on 127.0.0.1 (a free port) that hands each EC2 query-protocol request, with its body and parsed
 * form, to `handle`: the shape every stand-in and proxy in front of moto shares.
 */
export async function ec2Server(
  handle: (req: IncomingMessage, res: ServerResponse, body: Buffer, form: URLSearchParams) => Promise<void> | void,
): Promise<{ url: string; close(): Promise<void> }> {
  const http = await import('node:http');
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks);
      await handle(req, res, body, new URLSearchParams(body.toString('utf8')));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/**
 * A stand-in for EC2's API throttling, which moto never does: an HTTP proxy in front of moto that answers every
 * `every`-th request with the error EC2 returns when throttled (HTTP 503, Code RequestLimitExceeded, EC2 query
 * error XML) and forwards the rest unchanged. With `loseAnswer`, every `every`-th request of that action is done
 * by moto but its answer is replaced by a 502 with no EC2 body (a load balancer or proxy failing on the way back):
 * the caller cannot know whether the call happened.
 */
export async function startThrottlingProxy(target: string, opts: { every: number; loseAnswer?: { action: string; every: number } }): Promise<ThrottlingProxy> {
  let n = 0;
  let seen = 0;
  const state = { throttled: 0, forwarded: 0, lost: 0 };
  const server = await ec2Server(async (req, res, body, form) => {
    if (++n % opts.every === 0) {
      state.throttled++;
      ec2Error(res, 503, 'RequestLimitExceeded', 'Request limit exceeded.');
      return;
    }
    state.forwarded++;
    if (opts.loseAnswer && form.get('Action') === opts.loseAnswer.action && ++seen % opts.loseAnswer.every === 0) {
      state.lost++;
      await relay(target, req, body);
      res.writeHead(502, { 'content-type': 'text/html' });
      res.end('<html><body>502 Bad Gateway</body></html>');
      return;
    }
    await forward(target, req, res, body);
  });
  return {
    url: server.url,
    get throttled() {
      return state.throttled;
    },
    get forwarded() {
      return state.forwarded;
    },
    get lost() {
      return state.lost;
    },
    close: server.close,
  };
}

export interface FaultRule {
  /** The EC2 query action this rule answers (e.g. `CreateSnapshots`). */
  action: string;
  /** Which requests of that action (the form parameters; may ask moto); all when absent. */
  match?: (form: URLSearchParams) => boolean | Promise<boolean>;
  /** How many matching requests get the error; the rest are forwarded (default: all of them). */
  times?: number;
  status: number;
  code: string;
  message: string;
}

export interface FaultProxy {
  url: string;
  /** Per rule (same order): how many requests it answered with its error. */
  hits: number[];
  /** Actions forwarded to moto, in order. */
  forwarded: string[];
  close(): Promise<void>;
}

/**
 * A STAND-IN for EC2 errors moto never returns: an HTTP proxy in front of moto that answers the requests a rule
 * matches with that rule's error (HTTP status + EC2 query error XML: a permanent `UnauthorizedOperation` 403 for
 * one instance, a transient `ServiceUnavailable` 503 for the first N calls, ...) and forwards the rest unchanged.
 */
export async function startFaultProxy(target: string, rules: FaultRule[]): Promise<FaultProxy> {
  const hits = rules.map(() => 0);
  const forwarded: string[] = [];
  const server = await ec2Server(async (req, res, body, form) => {
    const action = form.get('Action') ?? '';
    for (const [i, rule] of rules.entries()) {
      if (rule.action !== action || hits[i]! >= (rule.times ?? Infinity)) continue;
      let matched: boolean;
      try {
        matched = rule.match ? await rule.match(form) : true;
      } catch (err) {
        res.writeHead(500);
        res.end(`fault proxy: rule ${i} match failed: ${String(err)}`);
        return;
      }
      if (!matched || hits[i]! >= (rule.times ?? Infinity)) continue;
      hits[i]!++;
      ec2Error(res, rule.status, rule.code, rule.message);
      return;
    }
    forwarded.push(action);
    await forward(target, req, res, body);
  });
  return { url: server.url, hits, forwarded, close: server.close };
}

/** Launch `count` instances in us-east-1a, each with a root and one data volume; returns their ids. */
export async function runMotoInstances(ec2: import('@aws-sdk/client-ec2').EC2Client, count: number): Promise<string[]> {
  const { DescribeImagesCommand, RunInstancesCommand } = await import('@aws-sdk/client-ec2');
  const img = (await ec2.send(new DescribeImagesCommand({}))).Images?.find((i) => i.RootDeviceName === '/dev/sda1');
  const ids: string[] = [];
  while (ids.length < count) {
    const n = Math.min(100, count - ids.length);
    const r = await ec2.send(
      new RunInstancesCommand({
        ImageId: img!.ImageId!,
        MinCount: n,
        MaxCount: n,
        Placement: { AvailabilityZone: 'us-east-1a' },
        BlockDeviceMappings: [
          { DeviceName: '/dev/sda1', Ebs: { VolumeSize: 8, DeleteOnTermination: true } },
          { DeviceName: '/dev/sdf', Ebs: { VolumeSize: 10 } },
        ],
      }),
    );
    ids.push(...r.Instances!.map((i) => i.InstanceId!));
  }
  return ids;
}

export interface ReplaceRootStandIn {
  url: string;
  tasks: { id: string; instanceId: string; snapshotId: string; deleteReplaced: boolean; state: string; describes: number }[];
  /** The next task created ends `failed` instead of swapping the root volume. */
  failNext: boolean;
  close(): Promise<void>;
}

/**
 * A STAND-IN for EC2's replace-root-volume tasks, which moto does not implement (it answers HTTP 500): an HTTP
 * proxy in front of moto that answers CreateReplaceRootVolumeTask and DescribeReplaceRootVolumeTasks in the EC2
 * query-protocol XML the SDK parses, walks each task pending -> in-progress -> succeeded over successive
 * describes, and performs the swap on moto itself (CreateVolume from the snapshot, detach the old root, attach the
 * new one on the root device), as EC2 would. Every other call is forwarded to moto unchanged.
 */
export async function startReplaceRootStandIn(motoUrl: string): Promise<ReplaceRootStandIn> {
  const { randomBytes } = await import('node:crypto');
  const sdk = await import('@aws-sdk/client-ec2');
  const ec2 = new sdk.EC2Client({
    region: 'us-east-1',
    endpoint: motoUrl,
    credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' },
    maxAttempts: 1,
  });
  const tasks: ReplaceRootStandIn['tasks'] = [];
  const state = { failNext: false };
  const ns = 'http://ec2.amazonaws.com/doc/2016-11-15/';
  const taskXml = (t: ReplaceRootStandIn['tasks'][number]) =>
    `<replaceRootVolumeTaskId>${t.id}</replaceRootVolumeTaskId><instanceId>${t.instanceId}</instanceId><taskState>${t.state}</taskState><startTime>${new Date().toISOString()}</startTime><snapshotId>${t.snapshotId}</snapshotId><deleteReplacedRootVolume>${t.deleteReplaced}</deleteReplacedRootVolume>`;

  async function swapRoot(t: ReplaceRootStandIn['tasks'][number]) {
    const inst = (await ec2.send(new sdk.DescribeInstancesCommand({ InstanceIds: [t.instanceId] }))).Reservations![0]!.Instances![0]!;
    const rootDev = inst.RootDeviceName!;
    const old = inst.BlockDeviceMappings!.find((m) => m.DeviceName === rootDev)!.Ebs!.VolumeId!;
    const v = await ec2.send(new sdk.CreateVolumeCommand({ AvailabilityZone: inst.Placement!.AvailabilityZone!, SnapshotId: t.snapshotId }));
    await ec2.send(new sdk.DetachVolumeCommand({ VolumeId: old, InstanceId: t.instanceId }));
    await ec2.send(new sdk.AttachVolumeCommand({ VolumeId: v.VolumeId!, InstanceId: t.instanceId, Device: rootDev }));
    if (t.deleteReplaced) await ec2.send(new sdk.DeleteVolumeCommand({ VolumeId: old }));
  }

  const server = await ec2Server(async (req, res, body, form) => {
    const action = form.get('Action');
    const reply = (xml: string) => {
      res.writeHead(200, { 'content-type': 'text/xml;charset=UTF-8', 'content-length': Buffer.byteLength(xml) });
      res.end(xml);
    };
    try {
      if (action === 'CreateReplaceRootVolumeTask') {
        const t = {
          id: `replacevol-${randomBytes(8).toString('hex')}`,
          instanceId: form.get('InstanceId')!,
          snapshotId: form.get('SnapshotId')!,
          deleteReplaced: form.get('DeleteReplacedRootVolume') === 'true',
          state: 'pending',
          describes: 0,
          fail: state.failNext,
        };
        state.failNext = false;
        tasks.push(t);
        return reply(
          `<?xml version="1.0" encoding="UTF-8"?>\n<CreateReplaceRootVolumeTaskResponse xmlns="${ns}"><requestId>${randomBytes(8).toString('hex')}</requestId><replaceRootVolumeTask>${taskXml(t)}</replaceRootVolumeTask></CreateReplaceRootVolumeTaskResponse>`,
        );
      }
      if (action === 'DescribeReplaceRootVolumeTasks') {
        const ids = [...form.entries()].filter(([k]) => k.startsWith('ReplaceRootVolumeTaskId.')).map(([, v]) => v);
        const chosen = tasks.filter((t) => !ids.length || ids.includes(t.id));
        for (const t of chosen) {
          t.describes++;
          if (t.state === 'pending' && t.describes >= 1) t.state = 'in-progress';
          else if (t.state === 'in-progress' && t.describes >= 3) {
            if ((t as any).fail) t.state = 'failed';
            else {
              await swapRoot(t);
              t.state = 'succeeded';
            }
          }
        }
        return reply(
          `<?xml version="1.0" encoding="UTF-8"?>\n<DescribeReplaceRootVolumeTasksResponse xmlns="${ns}"><requestId>${randomBytes(8).toString('hex')}</requestId><replaceRootVolumeTaskSet>${chosen.map((t) => `<item>${taskXml(t)}</item>`).join('')}</replaceRootVolumeTaskSet></DescribeReplaceRootVolumeTasksResponse>`,
        );
      }
      await forward(motoUrl, req, res, body);
    } catch (err) {
      res.writeHead(500);
      res.end(String(err));
    }
  });
  return {
    url: server.url,
    tasks,
    get failNext() {
      return state.failNext;
    },
    set failNext(v: boolean) {
      state.failNext = v;
    },
    close: async () => {
      ec2.destroy();
      await server.close();
    },
  };
}
