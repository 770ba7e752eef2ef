/**
 * A STAND-IN for EC2 (not an emulator, not moto): an HTTP server on 127.0.0.1 that answers the calls a backup makes
 * (DescribeInstances, DescribeVolumes, CreateSnapshots, CreateTags, DescribeSnapshots, DeleteSnapshot) in the EC2
 * query-protocol XML the AWS SDK parses, with the behaviour that decides how a backup scales and that moto lacks:
 * - every call takes about `latencyMs` (default 100 ms, +-20%), answered concurrently;
 * - a snapshot stays `pending` for `pendingMs` (default 30 s) after CreateSnapshots, then is `completed`;
 * - requests are rate-limited per category with token buckets, as EC2 does (bucket size / refill per second,
 *   after the figures AWS documents for request throttling: mutating actions 50/5, CreateTags 100/10,
 *   describe actions 100/20); an empty bucket answers HTTP 503 RequestLimitExceeded.
 * Every call is counted per action. Instances are made up by `addInstances` (a root and a data volume each).
 */
import { randomBytes } from 'node:crypto';
import { ec2Error, ec2Server } from './moto.js';

export interface Ec2StandInOptions {
  latencyMs?: number;
  pendingMs?: number;
  /** Token buckets per category: [size, refill per second]; `false` turns throttling off. */
  buckets?: Partial<Record<Category, [number, number]>> | false;
}

type Category = 'mutating' | 'tags' | 'describe';
const CATEGORY: Record<string, Category> = { CreateSnapshots: 'mutating', DeleteSnapshot: 'mutating', CreateTags: 'tags' };
const DEFAULT_BUCKETS: Record<Category, [number, number]> = { mutating: [50, 5], tags: [100, 10], describe: [100, 20] };

interface Volume {
  id: string;
  device: string;
  sizeGiB: number;
}
interface Snap {
  id: string;
  volumeId: string;
  sizeGiB: number;
  started: number;
  description: string;
  tags: Map<string, string>;
}

export interface Ec2StandIn {
  url: string;
  /** Calls answered (not throttled), per action. */
  calls: Record<string, number>;
  /** Requests answered with RequestLimitExceeded, per action. */
  throttled: Record<string, number>;
  /** Snapshots made so far. */
  snapshots: number;
  /** Make `count` running instances in `zone`, each with /dev/sda1 (root, 8 GiB) and /dev/sdf (10 GiB); returns their ids. */
  addInstances(count: number, zone?: string): string[];
  resetCounters(): void;
  close(): Promise<void>;
}

const NS = 'http://ec2.amazonaws.com/doc/2016-11-15/';
const hex = (n: number) => randomBytes(n).toString('hex');
const esc = (x: string) => x.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** Values of a query-protocol list parameter (`InstanceId.1`, `InstanceId.2`, ...). */
function listParam(form: URLSearchParams, prefix: string): string[] {
  return [...form.entries()].filter(([k]) => k.startsWith(prefix + '.')).map(([, v]) => v);
}

export async function startEc2StandIn(opts: Ec2StandInOptions = {}): Promise<Ec2StandIn> {
  const latency = opts.latencyMs ?? 100;
  const pending = opts.pendingMs ?? 30_000;
  const instances = new Map<string, { zone: string; volumes: Volume[] }>();
  const snaps = new Map<string, Snap>();
  const calls: Record<string, number> = {};
  const throttled: Record<string, number> = {};
  const buckets = new Map<Category, { tokens: number; size: number; rate: number; at: number }>();
  if (opts.buckets !== false) {
    for (const [cat, [size, rate]] of Object.entries({ ...DEFAULT_BUCKETS, ...(opts.buckets ?? {}) }) as [Category, [number, number]][])
      buckets.set(cat, { tokens: size, size, rate, at: Date.now() });
  }
  const take = (action: string): boolean => {
    const b = buckets.get(CATEGORY[action] ?? 'describe');
    if (!b) return true;
    const now = Date.now();
    b.tokens = Math.min(b.size, b.tokens + ((now - b.at) / 1000) * b.rate);
    b.at = now;
    if (b.tokens < 1) return false;
    b.tokens--;
    return true;
  };

  const snapshotXml = (s: Snap, stateTag: 'state' | 'status') => {
    const done = Date.now() - s.started >= pending;
    const progress = done ? 100 : Math.floor((100 * (Date.now() - s.started)) / pending);
    const tags = [...s.tags].map(([k, v]) => `<item><key>${esc(k)}</key><value>${esc(v)}</value></item>`).join('');
    return (
      `<item><snapshotId>${s.id}</snapshotId><volumeId>${s.volumeId}</volumeId><${stateTag}>${done ? 'completed' : 'pending'}</${stateTag}>` +
      `<startTime>${new Date(s.started).toISOString()}</startTime><progress>${progress}%</progress><ownerId>123456789012</ownerId>` +
      `<volumeSize>${s.sizeGiB}</volumeSize><description>${esc(s.description)}</description><encrypted>false</encrypted><tagSet>${tags}</tagSet></item>`
    );
  };

  const answer = (action: string, form: URLSearchParams): string | { status: number; code: string; message: string } => {
    switch (action) {
      case 'DescribeInstances': {
        const ids = listParam(form, 'InstanceId');
        const missing = ids.filter((id) => !instances.has(id));
        if (missing.length) return { status: 400, code: 'InvalidInstanceID.NotFound', message: `The instance IDs '${missing.join(', ')}' do not exist` };
        const items = ids.map((id) => {
          const i = instances.get(id)!;
          const bdm = i.volumes
            .map(
              (v) =>
                `<item><deviceName>${v.device}</deviceName><ebs><volumeId>${v.id}</volumeId><status>attached</status><deleteOnTermination>${v.device === '/dev/sda1'}</deleteOnTermination></ebs></item>`,
            )
            .join('');
          return `<item><instanceId>${id}</instanceId><instanceState><code>16</code><name>running</name></instanceState><placement><availabilityZone>${i.zone}</availabilityZone></placement><rootDeviceName>/dev/sda1</rootDeviceName><blockDeviceMapping>${bdm}</blockDeviceMapping></item>`;
        });
        return `<reservationSet><item><reservationId>r-${hex(8)}</reservationId><ownerId>123456789012</ownerId><instancesSet>${items.join('')}</instancesSet></item></reservationSet>`;
      }
      case 'DescribeVolumes': {
        const ids = new Set(listParam(form, 'VolumeId'));
        const items = [...instances.values()].flatMap((i) =>
          i.volumes
            .filter((v) => ids.has(v.id))
            .map(
              (v) =>
                `<item><volumeId>${v.id}</volumeId><size>${v.sizeGiB}</size><availabilityZone>${i.zone}</availabilityZone><status>in-use</status><volumeType>gp3</volumeType><iops>3000</iops><throughput>125</throughput><encrypted>false</encrypted></item>`,
            ),
        );
        return `<volumeSet>${items.join('')}</volumeSet>`;
      }
      case 'CreateSnapshots': {
        const inst = instances.get(form.get('InstanceSpecification.InstanceId') ?? '');
        if (!inst) return { status: 400, code: 'InvalidInstanceID.NotFound', message: 'The instance does not exist' };
        const tags = new Map<string, string>();
        for (let n = 1; form.has(`TagSpecification.1.Tag.${n}.Key`); n++)
          tags.set(form.get(`TagSpecification.1.Tag.${n}.Key`)!, form.get(`TagSpecification.1.Tag.${n}.Value`) ?? '');
        const made = inst.volumes.map((v) => {
          const s: Snap = {
            id: `snap-${hex(8)}`,
            volumeId: v.id,
            sizeGiB: v.sizeGiB,
            started: Date.now(),
            description: form.get('Description') ?? '',
            tags: new Map(tags),
          };
          snaps.set(s.id, s);
          return s;
        });
        return `<snapshotSet>${made.map((s) => snapshotXml(s, 'state')).join('')}</snapshotSet>`;
      }
      case 'CreateTags': {
        const ids = listParam(form, 'ResourceId');
        for (const id of ids) {
          const s = snaps.get(id);
          if (!s) return { status: 400, code: 'InvalidSnapshot.NotFound', message: `The snapshot '${id}' does not exist.` };
          for (let n = 1; form.has(`Tag.${n}.Key`); n++) s.tags.set(form.get(`Tag.${n}.Key`)!, form.get(`Tag.${n}.Value`) ?? '');
        }
        return '<return>true</return>';
      }
      case 'DescribeSnapshots': {
        const ids = listParam(form, 'SnapshotId');
        const missing = ids.filter((id) => !snaps.has(id));
        if (missing.length) return { status: 400, code: 'InvalidSnapshot.NotFound', message: `The snapshot '${missing[0]}' does not exist.` };
        const chosen = ids.length ? ids.map((id) => snaps.get(id)!) : [...snaps.values()];
        return `<snapshotSet>${chosen.map((s) => snapshotXml(s, 'status')).join('')}</snapshotSet>`;
      }
      case 'DeleteSnapshot':
        snaps.delete(form.get('SnapshotId') ?? '');
        return '<return>true</return>';
      default:
        return { status: 400, code: 'InvalidAction', message: `the EC2 stand-in does not implement ${action}` };
    }
  };

  const server = await ec2Server(async (_req, res, _body, form) => {
    const action = form.get('Action') ?? '';
    await new Promise((r) => setTimeout(r, latency * (0.8 + 0.4 * Math.random())));
    if (!take(action)) {
      throttled[action] = (throttled[action] ?? 0) + 1;
      ec2Error(res, 503, 'RequestLimitExceeded', 'Request limit exceeded.');
      return;
    }
    calls[action] = (calls[action] ?? 0) + 1;
    const a = answer(action, form);
    if (typeof a !== 'string') return ec2Error(res, a.status, a.code, a.message);
    const xml = `<?xml version="1.0" encoding="UTF-8"?>\n<${action}Response xmlns="${NS}"><requestId>${hex(8)}</requestId>${a}</${action}Response>`;
    res.writeHead(200, { 'content-type': 'text/xml;charset=UTF-8', 'content-length': Buffer.byteLength(xml) });
    res.end(xml);
  });

  return {
    url: server.url,
    calls,
    throttled,
    get snapshots() {
      return snaps.size;
    },
    addInstances(count, zone = 'us-east-1a') {
      const ids: string[] = [];
      for (let n = 0; n < count; n++) {
        const id = `i-${hex(8)}`;
        instances.set(id, {
          zone,
          volumes: [
            { id: `vol-${hex(8)}`, device: '/dev/sda1', sizeGiB: 8 },
            { id: `vol-${hex(8)}`, device: '/dev/sdf', sizeGiB: 10 },
          ],
        });
        ids.push(id);
      }
      return ids;
    },
    resetCounters() {
      for (const o of [calls, throttled]) for (const k of Object.keys(o)) delete o[k];
    },
    close: server.close,
  };
}
