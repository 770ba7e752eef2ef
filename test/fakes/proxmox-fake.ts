/**
 * A FAKE Proxmox VE API server for tests (no Proxmox emulator exists). It follows the documented API
 * (the Proxmox VE API viewer pve.proxmox.com/pve-docs/api-viewer and qemu-server src/PVE/API2/Qemu.pm) for the routes the provider uses:
 *   GET  /api2/json/cluster/resources?type=vm
 *   GET  /api2/json/nodes/{node}/qemu/{vmid}/status/current | config
 *   GET  /api2/json/nodes/{node}/qemu/{vmid}/snapshot                 (with the pseudo-entry `current`)
 *   POST /api2/json/nodes/{node}/qemu/{vmid}/snapshot                 snapname, description, vmstate -> UPID qmsnapshot
 *   POST /api2/json/nodes/{node}/qemu/{vmid}/snapshot/{name}/rollback start -> UPID qmrollback
 *   DELETE /api2/json/nodes/{node}/qemu/{vmid}/snapshot/{name}        -> UPID qmdelsnapshot
 *   POST /api2/json/nodes/{node}/qemu/{vmid}/status/reboot            -> UPID qmreboot
 *   GET  /api2/json/nodes/{node}/tasks/{upid}/status | log
 * Tasks stay `running` for `taskPolls` polls, then `stopped` with `OK` or the error the test injected.
 * Every request is recorded (method, path, authorization header, content-type, body) for assertions.
 * Each VM has a `data` string standing for its disk contents: a snapshot copies it, a rollback puts it back.
 * Listens on 127.0.0.1 only; HTTPS when given a key and certificate.
 */
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';

export interface FakeVm {
  node: string;
  vmid: number;
  name: string;
  status: 'running' | 'stopped';
  config: Record<string, string>;
  data: string;
  snapshots: { name: string; description: string; snaptime: number; vmstate: number; data: string; parent?: string }[];
}

export interface RecordedRequest {
  method: string;
  path: string;
  query: string;
  authorization?: string;
  contentType?: string;
  body: string;
}

interface FakeTask {
  upid: string;
  node: string;
  polls: number;
  exitstatus: string;
  log: string[];
  /** Applied when the task finishes successfully. */
  effect?: () => void;
}

export interface ProxmoxFakeOptions {
  /** `USER@REALM!TOKENID` and the secret the fake accepts. */
  tokenId: string;
  tokenSecret: string;
  vms: Omit<FakeVm, 'snapshots' | 'data'>[];
  /** Polls a task stays `running` before it stops (default 2). */
  taskPolls?: number;
  tls?: { key: string; cert: string };
}

export class ProxmoxFake {
  readonly requests: RecordedRequest[] = [];
  readonly vms: FakeVm[];
  private readonly tasks = new Map<string, FakeTask>();
  /** Next task of this type (qmsnapshot, qmrollback, qmdelsnapshot) fails with this exit status. */
  readonly failNext = new Map<string, string>();
  /** Answer every request with 403 (a token without the needed privileges). */
  forbid = false;
  private server?: http.Server;
  private seq = 0;
  url = '';

  constructor(private readonly opts: ProxmoxFakeOptions) {
    this.vms = opts.vms.map((v) => ({ ...v, data: `initial-${v.vmid}`, snapshots: [] }));
  }

  async start(port = 0): Promise<string> {
    const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => this.handle(req, Buffer.concat(chunks).toString('utf8'), res));
    };
    this.server = this.opts.tls ? https.createServer({ key: this.opts.tls.key, cert: this.opts.tls.cert }, handler) : http.createServer(handler);
    await new Promise<void>((resolve) => this.server!.listen(port, '127.0.0.1', resolve));
    const { port: p } = this.server.address() as AddressInfo;
    this.url = `${this.opts.tls ? 'https' : 'http'}://127.0.0.1:${p}`;
    return this.url;
  }

  async stop(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }

  vm(vmid: number): FakeVm {
    const v = this.vms.find((x) => x.vmid === vmid);
    if (!v) throw new Error(`fake: no VM ${vmid}`);
    return v;
  }

  private newTask(node: string, type: string, id: string, effect?: () => void, error?: string): string {
    const hex = (n: number, w = 8) => n.toString(16).toUpperCase().padStart(w, '0');
    const upid = `UPID:${node}:${hex(4000 + ++this.seq)}:${hex(123456 + this.seq)}:${hex(Math.floor(Date.now() / 1000))}:${type}:${id}:${this.opts.tokenId}:`;
    const injected = this.failNext.get(type);
    if (injected) this.failNext.delete(type);
    const exitstatus = error ?? injected ?? 'OK';
    this.tasks.set(upid, {
      upid,
      node,
      polls: this.opts.taskPolls ?? 2,
      exitstatus,
      log: exitstatus === 'OK' ? ['TASK OK'] : [exitstatus, `TASK ERROR: ${exitstatus}`],
      effect,
    });
    return upid;
  }

  private handle(req: http.IncomingMessage, body: string, res: http.ServerResponse): void {
    const u = new URL(req.url ?? '/', 'http://fake');
    this.requests.push({
      method: req.method ?? '',
      path: u.pathname,
      query: u.search,
      authorization: req.headers.authorization,
      contentType: req.headers['content-type'],
      body,
    });
    const send = (status: number, data: unknown, reason?: string, extra: Record<string, unknown> = {}) => {
      res.writeHead(status, reason ?? http.STATUS_CODES[status], { 'content-type': 'application/json;charset=UTF-8' });
      res.end(JSON.stringify({ data, ...extra }));
    };
    if (req.headers.authorization !== `PVEAPIToken=${this.opts.tokenId}=${this.opts.tokenSecret}`) return send(401, null, 'authentication failure');
    if (this.forbid) return send(403, null, `Permission check failed (/vms, VM.Audit)`);
    const form = new URLSearchParams(req.method === 'GET' || req.method === 'DELETE' ? u.search : body);
    const p = u.pathname
      .replace(/^\/api2\/json/, '')
      .split('/')
      .filter(Boolean)
      .map(decodeURIComponent);

    if (req.method === 'GET' && p.join('/') === 'cluster/resources') {
      return send(
        200,
        this.vms.map((v) => ({ id: `qemu/${v.vmid}`, type: 'qemu', vmid: v.vmid, name: v.name, node: v.node, status: v.status })),
      );
    }
    if (p[0] === 'nodes' && p[2] === 'tasks' && p[3]) {
      const t = this.tasks.get(p[3]);
      if (!t || t.node !== p[1]) return send(500, null, `unable to parse worker upid '${p[3]}'`);
      if (p[4] === 'status') {
        if (t.polls > 0) {
          t.polls--;
          return send(200, { upid: t.upid, node: t.node, status: 'running', type: t.upid.split(':')[5] });
        }
        if (t.effect && t.exitstatus === 'OK') {
          t.effect();
          t.effect = undefined;
        }
        return send(200, { upid: t.upid, node: t.node, status: 'stopped', exitstatus: t.exitstatus, type: t.upid.split(':')[5] });
      }
      if (p[4] === 'log')
        return send(
          200,
          t.log.map((line, i) => ({ n: i + 1, t: line })),
          undefined,
          { total: t.log.length },
        );
    }
    if (p[0] === 'nodes' && p[2] === 'qemu' && p[3]) {
      const vm = this.vms.find((v) => String(v.vmid) === p[3] && v.node === p[1]);
      if (!vm) return send(500, null, `Configuration file 'nodes/${p[1]}/qemu-server/${p[3]}.conf' does not exist`);
      const rest = p.slice(4).join('/');
      if (req.method === 'GET' && rest === 'status/current') return send(200, { vmid: vm.vmid, name: vm.name, status: vm.status, qmpstatus: vm.status });
      if (req.method === 'GET' && rest === 'config') return send(200, { name: vm.name, ...vm.config, digest: 'fake' });
      if (req.method === 'POST' && rest === 'status/reboot') return send(200, this.newTask(vm.node, 'qmreboot', String(vm.vmid)));
      if (rest === 'snapshot' && req.method === 'GET') {
        const list: unknown[] = vm.snapshots.map((s) => ({
          name: s.name,
          description: s.description,
          snaptime: s.snaptime,
          vmstate: s.vmstate,
          ...(s.parent ? { parent: s.parent } : {}),
        }));
        list.push({
          name: 'current',
          description: 'You are here!',
          running: vm.status === 'running' ? 1 : 0,
          ...(vm.snapshots.length ? { parent: vm.snapshots[vm.snapshots.length - 1]!.name } : {}),
        });
        return send(200, list);
      }
      if (rest === 'snapshot' && req.method === 'POST') {
        const name = form.get('snapname') ?? '';
        // pve-common JSONSchema 'pve-configid'-style check for snapshot names.
        if (!/^[a-z][a-z0-9_-]+$/i.test(name) || name.length > 40 || ['current', 'pending'].includes(name)) {
          return send(400, null, 'Parameter verification failed.', { errors: { snapname: `invalid format - invalid configuration ID '${name}'` } });
        }
        const vmstate = Number(form.get('vmstate') ?? 0);
        if (vm.snapshots.some((s) => s.name === name))
          return send(200, this.newTask(vm.node, 'qmsnapshot', String(vm.vmid), undefined, `snapshot name '${name}' already used`));
        const data = vm.data;
        const parent = vm.snapshots[vm.snapshots.length - 1]?.name;
        return send(
          200,
          this.newTask(vm.node, 'qmsnapshot', String(vm.vmid), () =>
            vm.snapshots.push({ name, description: form.get('description') ?? '', snaptime: Math.floor(Date.now() / 1000), vmstate, data, parent }),
          ),
        );
      }
      const sm = /^snapshot\/([^/]+)(\/rollback)?$/.exec(rest);
      if (sm) {
        const snap = vm.snapshots.find((s) => s.name === sm[1]);
        if (req.method === 'POST' && sm[2]) {
          if (!snap) return send(200, this.newTask(vm.node, 'qmrollback', String(vm.vmid), undefined, `snapshot '${sm[1]}' does not exist`));
          const start = form.get('start') === '1';
          // Rollback stops the VM first and starts it again only with start=1 (or a vmstate snapshot).
          return send(
            200,
            this.newTask(vm.node, 'qmrollback', String(vm.vmid), () => {
              vm.data = snap.data;
              vm.status = start || snap.vmstate ? 'running' : 'stopped';
            }),
          );
        }
        if (req.method === 'DELETE' && !sm[2]) {
          if (!snap) return send(200, this.newTask(vm.node, 'qmdelsnapshot', String(vm.vmid), undefined, `snapshot '${sm[1]}' does not exist`));
          return send(
            200,
            this.newTask(vm.node, 'qmdelsnapshot', String(vm.vmid), () => {
              vm.snapshots = vm.snapshots.filter((s) => s !== snap);
            }),
          );
        }
      }
    }
    return send(501, null, `Method '${req.method} ${u.pathname}' not implemented`);
  }
}
