/**
 * A FAKE of the Google Compute Engine REST API (v1), for tests only: Google ships no Compute emulator.
 * A small node:http server on 127.0.0.1 following the documented REST shapes for exactly the calls the gcp
 * provider makes (https://cloud.google.com/compute/docs/reference/rest/v1): instances get/stop/start/reset/
 * attachDisk/detachDisk, disks and regionDisks insert/get/delete/createSnapshot, snapshots get/list/delete, zone and global
 * operations wait. Operations answer RUNNING to the first wait and DONE to the next (so callers must loop),
 * snapshots are CREATING on the first get and READY afterwards (or FAILED when told to fail).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeDisk {
  name: string;
  zone: string;
  sizeGb: string;
  type: string;
  sourceSnapshot?: string;
  labels?: Record<string, string>;
  users?: string[];
  replicaZones?: string[];
}
export interface FakeAttachedDisk {
  deviceName: string;
  boot: boolean;
  autoDelete: boolean;
  source: string;
}
export interface FakeInstance {
  name: string;
  zone: string;
  status: 'RUNNING' | 'STOPPING' | 'TERMINATED';
  disks: FakeAttachedDisk[];
}
interface FakeOp {
  name: string;
  zone?: string;
  region?: string;
  operationType: string;
  targetLink: string;
  status: 'RUNNING' | 'DONE';
  waits: number;
  error?: { errors: { code: string; message: string }[] };
  finish?: () => void;
}

export interface GcpComputeFake {
  url: string;
  port: number;
  project: string;
  instances: Map<string, FakeInstance>;
  disks: Map<string, FakeDisk>;
  snapshots: Map<string, any>;
  /** Every request: method and path with query, for asserting what was called. */
  requests: { method: string; path: string; body?: any; headers: http.IncomingHttpHeaders }[];
  /** Snapshots of this disk name end FAILED. */
  failSnapshotsOf: Set<string>;
  /** Answer this many of the next requests with HTTP 429 (rate limited). */
  throttleNext: number;
  /** `region` makes that disk a regional PD (replicated in `zone` and one more zone of the region). */
  addInstance(zone: string, name: string, disks: { deviceName: string; boot?: boolean; sizeGb?: number; region?: string }[]): FakeInstance;
  close(): Promise<void>;
}

export async function startGcpComputeFake(project = 'cnr-fake-project'): Promise<GcpComputeFake> {
  const base = `/compute/v1/projects/${project}`;
  const instances = new Map<string, FakeInstance>();
  const disks = new Map<string, FakeDisk>();
  const snapshots = new Map<string, any>();
  const ops = new Map<string, FakeOp>();
  const requests: GcpComputeFake['requests'] = [];
  const failSnapshotsOf = new Set<string>();
  let opSeq = 0;
  let url = '';
  const link = (p: string) => `${url}${base}/${p}`;
  const ikey = (zone: string, name: string) => `${zone}/${name}`;
  // Regional persistent disks are keyed `regions/<region>/<name>`, zonal ones `<zone>/<name>`.
  const keyOfSource = (source: string) => {
    const m = /(?:^|\/)(zones|regions)\/([^/]+)\/disks\/([^/]+)$/.exec(source);
    return m ? (m[1] === 'regions' ? ikey(`regions/${m[2]}`, m[3]!) : ikey(m[2]!, m[3]!)) : source;
  };

  const newOp = (operationType: string, targetLink: string, zone: string | undefined, finish?: () => void, region?: string): FakeOp => {
    const op: FakeOp = { name: `operation-${Date.now()}-${++opSeq}`, zone, region, operationType, targetLink, status: 'RUNNING', waits: 0, finish };
    ops.set(op.name, op);
    return op;
  };
  const opJson = (op: FakeOp) => ({
    kind: 'compute#operation',
    id: String(opSeq),
    name: op.name,
    operationType: op.operationType,
    targetLink: op.targetLink,
    status: op.status,
    progress: op.status === 'DONE' ? 100 : 50,
    ...(op.zone ? { zone: link(`zones/${op.zone}`) } : {}),
    ...(op.region ? { region: link(`regions/${op.region}`) } : {}),
    selfLink: link(
      op.zone ? `zones/${op.zone}/operations/${op.name}` : op.region ? `regions/${op.region}/operations/${op.name}` : `global/operations/${op.name}`,
    ),
    ...(op.error ? { error: op.error } : {}),
  });
  const notFound = (what: string) => ({
    status: 404,
    body: {
      error: { code: 404, message: `The resource '${what}' was not found`, errors: [{ reason: 'notFound', message: `The resource '${what}' was not found` }] },
    },
  });
  const bad = (message: string) => ({ status: 400, body: { error: { code: 400, message, errors: [{ reason: 'invalid', message }] } } });

  function route(method: string, path: string, q: URLSearchParams, body: any): { status: number; body: any } {
    if (!path.startsWith(base + '/')) return notFound(path);
    const p = path
      .slice(base.length + 1)
      .split('/')
      .map(decodeURIComponent);
    // global/operations/{op}/wait, zones/{z}/operations/{op}/wait, regions/{r}/operations/{op}/wait
    if (
      method === 'POST' &&
      ((p[0] === 'global' && p[1] === 'operations' && p[3] === 'wait') ||
        ((p[0] === 'zones' || p[0] === 'regions') && p[2] === 'operations' && p[4] === 'wait'))
    ) {
      const op = ops.get(p[0] === 'global' ? p[2]! : p[3]!);
      if (!op) return notFound(p.join('/'));
      if (op.status !== 'DONE' && op.waits++ >= 1) {
        op.status = 'DONE';
        op.finish?.();
      }
      return { status: 200, body: opJson(op) };
    }
    if (p[0] === 'global' && p[1] === 'snapshots') {
      const name = p[2];
      if (method === 'GET' && !name) {
        let items = [...snapshots.values()];
        const f = q.get('filter');
        // Supports the filter the provider sends: labels.KEY = "VALUE" [AND ...] (documented list filter syntax).
        for (const m of f?.matchAll(/labels\.([a-z0-9_-]+)\s*=\s*"?([^"\s)]+)"?/g) ?? []) items = items.filter((s) => s.labels?.[m[1]!] === m[2]);
        return { status: 200, body: { kind: 'compute#snapshotList', id: `projects/${project}/global/snapshots`, items, selfLink: link('global/snapshots') } };
      }
      const s = name ? snapshots.get(name) : undefined;
      if (method === 'GET' && name) {
        if (!s) return notFound(`projects/${project}/global/snapshots/${name}`);
        const out = { ...s };
        if (s.status === 'CREATING') s.status = s._fail ? 'FAILED' : 'READY';
        delete out._fail;
        return { status: 200, body: out };
      }
      if (method === 'DELETE' && name) {
        if (!s) return notFound(`projects/${project}/global/snapshots/${name}`);
        const op = newOp('delete', link(`global/snapshots/${name}`), undefined, () => snapshots.delete(name));
        return { status: 200, body: opJson(op) };
      }
    }
    if ((p[0] !== 'zones' && p[0] !== 'regions') || !p[1]) return notFound(path);
    const zone = p[1];
    // Disks: zones/{z}/disks/... (zonal) and regions/{r}/disks/... (regional PDs, a separate API: a regional disk
    // is not found through the zonal one and vice versa).
    const regional = p[0] === 'regions';
    const scope = `${p[0]}/${zone}`;
    const dkey = (name: string) => (regional ? ikey(scope, name) : ikey(zone, name));
    const scoped = (opType: string, target: string, finish?: () => void) =>
      regional ? newOp(opType, target, undefined, finish, zone) : newOp(opType, target, zone, finish);
    if (p[2] === 'disks') {
      const name = p[3];
      if (method === 'POST' && !name) {
        const d = body ?? {};
        if (!d.name) return bad('disk name required');
        if (disks.has(dkey(d.name))) return { status: 409, body: { error: { code: 409, message: `The resource '${d.name}' already exists` } } };
        const snapName = d.sourceSnapshot ? String(d.sourceSnapshot).split('/').pop()! : undefined;
        const snap = snapName ? snapshots.get(snapName) : undefined;
        if (d.sourceSnapshot && (!snap || snap.status !== 'READY')) return bad(`sourceSnapshot ${d.sourceSnapshot} is not ready`);
        if (regional && (!Array.isArray(d.replicaZones) || d.replicaZones.length !== 2)) return bad('A regional disk needs two replicaZones');
        const disk: FakeDisk = {
          name: d.name,
          zone,
          sizeGb: String(d.sizeGb ?? snap?.diskSizeGb ?? '10'),
          type: d.type ?? link(`${scope}/diskTypes/pd-balanced`),
          sourceSnapshot: snap ? link(`global/snapshots/${snapName}`) : undefined,
          labels: d.labels,
          users: [],
          ...(regional ? { replicaZones: d.replicaZones.map((z: string) => link(`zones/${z.split('/').pop()}`)) } : {}),
        };
        const op = scoped('insert', link(`${scope}/disks/${d.name}`), () => disks.set(dkey(d.name), disk));
        return { status: 200, body: opJson(op) };
      }
      const disk = name ? disks.get(dkey(name)) : undefined;
      if (!disk) return notFound(`projects/${project}/${scope}/disks/${name}`);
      if (method === 'GET' && !p[4])
        return {
          status: 200,
          body: {
            kind: 'compute#disk',
            ...disk,
            selfLink: link(`${scope}/disks/${disk.name}`),
            ...(regional ? { region: link(scope), zone: undefined } : { zone: link(scope) }),
          },
        };
      if (method === 'DELETE' && !p[4]) {
        if (disk.users?.length) return bad(`The disk resource is already being used by ${disk.users[0]}`);
        return { status: 200, body: opJson(scoped('delete', link(`${scope}/disks/${name}`), () => disks.delete(dkey(name!)))) };
      }
      if (method === 'POST' && p[4] === 'createSnapshot') {
        const s = body ?? {};
        if (!s.name || !/^[a-z]([-a-z0-9]*[a-z0-9])?$/.test(s.name) || s.name.length > 63) return bad(`Invalid value for field 'resource.name': '${s.name}'`);
        for (const [k, v] of Object.entries((s.labels ?? {}) as Record<string, string>)) {
          if (!/^[a-z][a-z0-9_-]{0,62}$/.test(k) || !/^[a-z0-9_-]{0,63}$/.test(v)) return bad(`Invalid label ${k}=${v}`);
        }
        if (snapshots.has(s.name)) return { status: 409, body: { error: { code: 409, message: `The resource '${s.name}' already exists` } } };
        const snap = {
          kind: 'compute#snapshot',
          id: String(Math.floor(Math.random() * 1e15)),
          name: s.name,
          description: s.description,
          labels: s.labels ?? {},
          sourceDisk: link(`${scope}/disks/${disk.name}`),
          diskSizeGb: disk.sizeGb,
          status: 'CREATING',
          creationTimestamp: new Date().toISOString(),
          selfLink: link(`global/snapshots/${s.name}`),
          _guestFlush: q.get('guestFlush') === 'true',
          _fail: failSnapshotsOf.has(disk.name),
        };
        const op = scoped('createSnapshot', link(`${scope}/disks/${disk.name}`), () => snapshots.set(s.name, snap));
        return { status: 200, body: opJson(op) };
      }
    }
    if (p[2] === 'instances' && p[3] && !regional) {
      const inst = instances.get(ikey(zone, p[3]));
      if (!inst) return notFound(`projects/${project}/zones/${zone}/instances/${p[3]}`);
      const self = link(`zones/${zone}/instances/${inst.name}`);
      if (method === 'GET' && !p[4])
        return {
          status: 200,
          body: {
            kind: 'compute#instance',
            name: inst.name,
            status: inst.status,
            zone: link(`zones/${zone}`),
            disks: inst.disks.map((d, i) => ({
              ...d,
              index: i,
              type: 'PERSISTENT',
              mode: 'READ_WRITE',
              kind: 'compute#attachedDisk',
              diskSizeGb: disks.get(keyOfSource(d.source))?.sizeGb,
            })),
            selfLink: self,
          },
        };
      const action = p[4];
      if (method === 'POST' && action === 'stop') return { status: 200, body: opJson(newOp('stop', self, zone, () => (inst.status = 'TERMINATED'))) };
      if (method === 'POST' && action === 'start') return { status: 200, body: opJson(newOp('start', self, zone, () => (inst.status = 'RUNNING'))) };
      if (method === 'POST' && action === 'reset') return { status: 200, body: opJson(newOp('reset', self, zone)) };
      if (method === 'POST' && action === 'detachDisk') {
        const dev = q.get('deviceName');
        const i = inst.disks.findIndex((d) => d.deviceName === dev);
        if (i < 0) return bad(`No attached disk found with device name '${dev}'`);
        if (inst.disks[i]!.boot && inst.status !== 'TERMINATED') return bad('The boot disk can only be detached from a stopped instance');
        return {
          status: 200,
          body: opJson(
            newOp('detachDisk', self, zone, () => {
              const [d] = inst.disks.splice(i, 1);
              const dd = disks.get(keyOfSource(d!.source));
              if (dd) dd.users = [];
            }),
          ),
        };
      }
      if (method === 'POST' && action === 'attachDisk') {
        const a = body ?? {};
        const dname = String(a.source ?? '')
          .split('/')
          .pop()!;
        const src = /\/regions\//.test(String(a.source)) ? String(a.source) : `zones/${zone}/disks/${dname}`;
        const dd = disks.get(keyOfSource(src));
        if (!dd) return bad(`disk ${a.source} not found`);
        if (inst.disks.some((d) => d.deviceName === a.deviceName)) return bad(`device name ${a.deviceName} is already in use`);
        if (a.boot && inst.status !== 'TERMINATED') return bad('A boot disk can only be attached to a stopped instance');
        return {
          status: 200,
          body: opJson(
            newOp('attachDisk', self, zone, () => {
              const entry = {
                deviceName: a.deviceName,
                boot: !!a.boot,
                autoDelete: !!a.autoDelete,
                source: link(src.replace(/^.*?((zones|regions)\/)/, '$1')),
              };
              if (a.boot) inst.disks.unshift(entry);
              else inst.disks.push(entry);
              dd.users = [self];
            }),
          ),
        };
      }
    }
    return notFound(path);
  }

  const fake: GcpComputeFake = {
    url: '',
    port: 0,
    project,
    instances,
    disks,
    snapshots,
    requests,
    failSnapshotsOf,
    throttleNext: 0,
    addInstance(zone, name, ds) {
      const inst: FakeInstance = { name, zone, status: 'RUNNING', disks: [] };
      for (const d of ds) {
        const dname = `${name}-${d.deviceName}`;
        const scope = d.region ? `regions/${d.region}` : `zones/${zone}`;
        const replicaZones = d.region ? [link(`zones/${zone}`), link(`zones/${d.region}-${zone.endsWith('-b') ? 'c' : 'b'}`)] : undefined;
        disks.set(d.region ? ikey(scope, dname) : ikey(zone, dname), {
          name: dname,
          zone: d.region ?? zone,
          sizeGb: String(d.sizeGb ?? 10),
          type: link(`${scope}/diskTypes/pd-balanced`),
          users: [link(`zones/${zone}/instances/${name}`)],
          ...(replicaZones ? { replicaZones } : {}),
        });
        inst.disks.push({ deviceName: d.deviceName, boot: !!d.boot, autoDelete: true, source: link(`${scope}/disks/${dname}`) });
      }
      instances.set(ikey(zone, name), inst);
      return inst;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const u = new URL(req.url ?? '/', 'http://127.0.0.1');
      let body: any;
      try {
        body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
      } catch {
        body = undefined;
      }
      requests.push({ method: req.method ?? 'GET', path: u.pathname + u.search, body, headers: req.headers });
      let out: { status: number; body: any };
      if (fake.throttleNext > 0) {
        fake.throttleNext--;
        out = {
          status: 429,
          body: { error: { code: 429, message: 'Rate Limit Exceeded', errors: [{ reason: 'rateLimitExceeded', message: 'Rate Limit Exceeded' }] } },
        };
      } else out = route(req.method ?? 'GET', u.pathname, u.searchParams, body);
      const text = JSON.stringify(out.body);
      res.writeHead(out.status, { 'content-type': 'application/json; charset=UTF-8', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  fake.port = (server.address() as AddressInfo).port;
  fake.url = url = `http://127.0.0.1:${fake.port}`;
  return fake;
}
