/**
 * A FAKE of the Azure Resource Manager REST API for Microsoft.Compute, for tests only: Microsoft ships no compute
 * emulator. An HTTPS server on 127.0.0.1 (self-signed certificate made with openssl; callers trust it with
 * NODE_EXTRA_CA_CERTS) following the documented shapes (https://learn.microsoft.com/rest/api/compute/) for the
 * calls the azure provider makes: virtualMachines get/update(PATCH)/deallocate/start/restart, scale set
 * instances get/update(PUT)/deallocate/start/restart, disks and snapshots PUT/GET/DELETE, snapshots list by
 * subscription (paged with nextLink).
 * As ARM does: every request needs `api-version` (400 without), a Bearer token (401 without); long-running
 * operations answer 201/202 with an `Azure-AsyncOperation` URL whose status stays InProgress for `pollsPerOperation`
 * polls before Succeeded (the change takes effect then); `throttleNext` requests get 429 with Retry-After.
 * Incremental snapshots copy in the background: completionPercent grows on each GET until 100; a disk can be
 * created from a snapshot only then. The OS disk can be swapped only on a deallocated machine.
 * Tokens: an App Service managed identity endpoint (`/msi/token`, header X-IDENTITY-HEADER), which
 * DefaultAzureCredential uses when IDENTITY_ENDPOINT and IDENTITY_HEADER are set.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import type http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { selfSignedCert } from '../support/self-signed.js';

type Json = Record<string, any>;
export interface FakeMachine {
  id: string;
  power: 'running' | 'deallocated';
  json: Json;
}

export interface AzureArmFake {
  url: string;
  /** PEM file of the fake's certificate (for NODE_EXTRA_CA_CERTS). */
  caFile: string;
  subscription: string;
  /** Environment for DefaultAzureCredential to take its token from the fake (App Service managed identity). */
  credentialEnv: Record<string, string>;
  /** The token the fake issues (to check it never shows up in output). */
  token: string;
  machines: Map<string, FakeMachine>;
  disks: Map<string, Json>;
  snapshots: Map<string, Json>;
  requests: { method: string; path: string; query: URLSearchParams; headers: http.IncomingHttpHeaders; status: number }[];
  throttleNext: number;
  pollsPerOperation: number;
  /** GETs of a snapshot before its background copy reaches 100 %. */
  copyGets: number;
  addVm(rg: string, name: string, dataLuns: number[], opts?: { zone?: string; pvTags?: Record<number, string> }): FakeMachine;
  addVmssInstance(rg: string, vmss: string, instanceId: string, dataLuns: number[]): FakeMachine;
  diskId(rg: string, name: string): string;
  close(): Promise<void>;
}

const LOCATION = 'westeurope';
const lower = (s: string) => s.toLowerCase();

export async function startAzureArmFake(): Promise<AzureArmFake> {
  const dir = mkdtempSync(path.join(tmpdir(), 'cnr-azure-fake-'));
  const { caFile, keyFile } = selfSignedCert(dir, 'cert');
  const subscription = '00000000-1111-2222-3333-444444444444';
  const identityHeader = randomBytes(12).toString('hex');
  const token = `fake-arm-token-${randomBytes(16).toString('hex')}`;
  const machines = new Map<string, FakeMachine>();
  const disks = new Map<string, Json>();
  const snapshots = new Map<string, Json>();
  const ops = new Map<string, { polls: number; done: () => void; error?: string }>();
  let base = '';

  const fake: AzureArmFake = {
    url: '',
    caFile,
    subscription,
    credentialEnv: {},
    token,
    machines,
    disks,
    snapshots,
    requests: [],
    throttleNext: 0,
    pollsPerOperation: 3,
    copyGets: 2,
    diskId: (rg, name) => `/subscriptions/${subscription}/resourceGroups/${rg}/providers/Microsoft.Compute/disks/${name}`,
    addVm: (rg, name, luns, opts = {}) =>
      addMachine(`/subscriptions/${subscription}/resourceGroups/${rg}/providers/Microsoft.Compute/virtualMachines/${name}`, rg, name, luns, opts),
    addVmssInstance: (rg, vmss, id, luns) =>
      addMachine(
        `/subscriptions/${subscription}/resourceGroups/${rg}/providers/Microsoft.Compute/virtualMachineScaleSets/${vmss}/virtualMachines/${id}`,
        rg,
        `${vmss}_${id}`,
        luns,
        {},
        id,
      ),
    close: () => new Promise((r) => server.close(() => r())),
  };

  function newDisk(rg: string, name: string, props: Json, extra: Json = {}): Json {
    const d = {
      id: fake.diskId(rg, name),
      name,
      type: 'Microsoft.Compute/disks',
      location: LOCATION,
      sku: { name: 'Premium_LRS' },
      tags: {},
      ...extra,
      properties: { diskSizeGB: 30, provisioningState: 'Succeeded', diskState: 'Attached', ...props },
    };
    disks.set(lower(d.id), d);
    return d;
  }

  function addMachine(
    id: string,
    rg: string,
    name: string,
    luns: number[],
    opts: { zone?: string; pvTags?: Record<number, string> },
    instanceId?: string,
  ): FakeMachine {
    const zones = opts.zone ? [opts.zone] : undefined;
    const os = newDisk(
      rg,
      `${name}_OsDisk_1`,
      { osType: 'Linux', hyperVGeneration: 'V2', creationData: { createOption: 'FromImage' } },
      { zones, managedBy: id },
    );
    const data = luns.map((lun) =>
      newDisk(
        rg,
        `${name}-data-${lun}`,
        { diskSizeGB: 64, creationData: { createOption: 'Empty' } },
        { zones, managedBy: id, tags: opts.pvTags?.[lun] ? { 'kubernetes.io-created-for-pv-name': opts.pvTags[lun] } : {} },
      ),
    );
    const json: Json = {
      id,
      name,
      type: instanceId ? 'Microsoft.Compute/virtualMachineScaleSets/virtualMachines' : 'Microsoft.Compute/virtualMachines',
      location: LOCATION,
      ...(zones ? { zones } : {}),
      ...(instanceId ? { instanceId } : {}),
      properties: {
        provisioningState: 'Succeeded',
        hardwareProfile: { vmSize: 'Standard_D4s_v5' },
        storageProfile: {
          osDisk: {
            osType: 'Linux',
            name: os.name,
            createOption: 'FromImage',
            caching: 'ReadWrite',
            managedDisk: { id: os.id, storageAccountType: 'Premium_LRS' },
            diskSizeGB: 30,
          },
          dataDisks: data.map((d, i) => ({
            lun: luns[i],
            name: d.name,
            createOption: 'Attach',
            caching: 'None',
            managedDisk: { id: d.id, storageAccountType: 'Premium_LRS' },
            diskSizeGB: 64,
          })),
        },
      },
    };
    const m: FakeMachine = { id, power: 'running', json };
    machines.set(lower(id), m);
    return m;
  }

  const send = (res: http.ServerResponse, status: number, body?: Json, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json', 'x-ms-request-id': randomUUID(), ...headers });
    res.end(body === undefined ? undefined : JSON.stringify(body));
  };
  const armError = (res: http.ServerResponse, status: number, code: string, message: string) => send(res, status, { error: { code, message } });

  /** Start a long-running operation: 201/202 + Azure-AsyncOperation; `done` runs when a poll first sees Succeeded. */
  function lro(res: http.ServerResponse, status: number, body: Json | undefined, done: () => void) {
    const opId = randomUUID();
    ops.set(opId, { polls: 0, done });
    const opUrl = `${base}/subscriptions/${subscription}/providers/Microsoft.Compute/locations/${LOCATION}/operations/${opId}?api-version=2024-03-01`;
    send(res, status, body, { 'azure-asyncoperation': opUrl, ...(status === 202 ? { location: `${opUrl}&monitor=true` } : {}) });
  }

  const attached = (diskId: string) => [...machines.values()].find((m) => storageDiskIds(m.json).some((d) => lower(d) === lower(diskId)));
  const storageDiskIds = (j: Json): string[] => {
    const sp = j.properties?.storageProfile ?? {};
    return [sp.osDisk?.managedDisk?.id, ...(sp.dataDisks ?? []).map((d: Json) => d.managedDisk?.id)].filter(Boolean);
  };

  function handleMachine(req: http.IncomingMessage, res: http.ServerResponse, m: FakeMachine, action: string | undefined, body: Json) {
    if (!action && req.method === 'GET') return send(res, 200, m.json);
    if (action && req.method === 'POST' && ['deallocate', 'start', 'restart'].includes(action)) {
      return lro(res, 202, undefined, () => void (m.power = action === 'deallocate' ? 'deallocated' : 'running'));
    }
    if (!action && (req.method === 'PATCH' || req.method === 'PUT')) {
      const sp = body.properties?.storageProfile;
      if (!sp) return armError(res, 400, 'InvalidParameter', 'only storageProfile updates are supported by this fake');
      const cur = m.json.properties.storageProfile;
      const newOs = sp.osDisk?.managedDisk?.id;
      if (newOs && lower(newOs) !== lower(cur.osDisk.managedDisk.id) && m.power !== 'deallocated') {
        return armError(res, 409, 'OperationNotAllowed', 'The OS disk of a VM can only be swapped when the VM is deallocated.');
      }
      for (const id of storageDiskIds({ properties: { storageProfile: sp } })) {
        if (!disks.has(lower(id))) return armError(res, 404, 'NotFound', `Disk ${id} was not found.`);
        const other = attached(id);
        if (other && other !== m) return armError(res, 409, 'OperationNotAllowed', `Disk ${id} is attached to ${other.id}.`);
      }
      const before = storageDiskIds(m.json);
      m.json.properties.storageProfile = {
        ...cur,
        ...(sp.osDisk ? { osDisk: { ...cur.osDisk, ...sp.osDisk } } : {}),
        ...(sp.dataDisks ? { dataDisks: sp.dataDisks } : {}),
      };
      m.json.properties.provisioningState = 'Updating';
      return lro(res, 200, m.json, () => {
        m.json.properties.provisioningState = 'Succeeded';
        const now = storageDiskIds(m.json).map(lower);
        for (const id of before) if (!now.includes(lower(id))) Object.assign(disks.get(lower(id)) ?? {}, { managedBy: undefined });
        for (const id of now) Object.assign(disks.get(id)!, { managedBy: m.id });
      });
    }
    return armError(res, 405, 'MethodNotAllowed', `${req.method} ${action ?? ''} not supported by this fake`);
  }

  function handleSnapshot(req: http.IncomingMessage, res: http.ServerResponse, id: string, rg: string, name: string, body: Json) {
    const s = snapshots.get(lower(id));
    if (req.method === 'GET') {
      if (!s) return armError(res, 404, 'ResourceNotFound', `The Resource 'Microsoft.Compute/snapshots/${name}' was not found.`);
      if (s.properties.provisioningState === 'Succeeded' && s.properties.completionPercent < 100)
        s.properties.completionPercent = Math.min(100, s.properties.completionPercent + Math.ceil(100 / fake.copyGets));
      return send(res, 200, s);
    }
    if (req.method === 'DELETE') {
      if (!s) return send(res, 204);
      return lro(res, 202, undefined, () => void snapshots.delete(lower(id)));
    }
    if (req.method === 'PUT') {
      const src = body.properties?.creationData?.sourceResourceId;
      const disk = src && disks.get(lower(src));
      if (!disk) return armError(res, 404, 'NotFound', `Source disk ${src} was not found.`);
      if (!body.location) return armError(res, 400, 'LocationRequired', 'The location property is required for this definition.');
      const snap = {
        id,
        name,
        type: 'Microsoft.Compute/snapshots',
        location: body.location,
        tags: body.tags ?? {},
        sku: { name: 'Standard_LRS', tier: 'Standard' },
        properties: {
          ...body.properties,
          diskSizeGB: disk.properties.diskSizeGB,
          osType: disk.properties.osType,
          timeCreated: new Date().toISOString(),
          provisioningState: 'Creating',
          completionPercent: 0,
          incremental: !!body.properties?.incremental,
        },
      };
      snapshots.set(lower(id), snap);
      return lro(res, 201, snap, () => void (snap.properties.provisioningState = 'Succeeded'));
    }
    return armError(res, 405, 'MethodNotAllowed', 'not supported');
  }

  function handleDisk(req: http.IncomingMessage, res: http.ServerResponse, id: string, rg: string, name: string, body: Json) {
    const d = disks.get(lower(id));
    if (req.method === 'GET')
      return d ? send(res, 200, { ...d, managedBy: attached(id)?.id }) : armError(res, 404, 'ResourceNotFound', `Disk ${name} not found`);
    if (req.method === 'DELETE') {
      if (!d) return send(res, 204);
      if (attached(id)) return armError(res, 409, 'OperationNotAllowed', `Disk ${name} is attached to a VM.`);
      return lro(res, 202, undefined, () => void disks.delete(lower(id)));
    }
    if (req.method === 'PUT') {
      const src = body.properties?.creationData?.sourceResourceId;
      const snap = src && snapshots.get(lower(src));
      if (!snap) return armError(res, 404, 'NotFound', `Source snapshot ${src} was not found.`);
      if (snap.properties.completionPercent < 100) return armError(res, 409, 'OperationNotAllowed', `Snapshot ${src} has not finished its background copy.`);
      const disk = newDisk(
        rg,
        name,
        { ...body.properties, diskSizeGB: snap.properties.diskSizeGB, provisioningState: 'Updating', diskState: 'Unattached' },
        { location: body.location, zones: body.zones, sku: body.sku, tags: body.tags ?? {} },
      );
      return lro(res, 201, disk, () => void (disk.properties.provisioningState = 'Succeeded'));
    }
    return armError(res, 405, 'MethodNotAllowed', 'not supported');
  }

  const server = https.createServer({ key: readFileSync(keyFile), cert: readFileSync(caFile) }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const u = new URL(req.url ?? '/', base);
      const record = (status: number) =>
        fake.requests.push({ method: req.method ?? '', path: u.pathname, query: u.searchParams, headers: req.headers, status });
      const origEnd = res.end.bind(res);
      res.end = ((...a: any[]) => (record(res.statusCode), origEnd(...a))) as typeof res.end;
      if (u.pathname === '/msi/token') {
        if (req.headers['x-identity-header'] !== identityHeader) return armError(res, 401, 'Unauthorized', 'wrong X-IDENTITY-HEADER');
        return send(res, 200, {
          access_token: token,
          expires_on: String(Math.floor(Date.now() / 1000) + 3600),
          resource: u.searchParams.get('resource'),
          token_type: 'Bearer',
          client_id: 'fake-client',
        });
      }
      if (req.headers.authorization !== `Bearer ${token}`)
        return armError(res, 401, 'AuthenticationFailed', 'Authentication failed. The Authorization header is missing or invalid.');
      if (!u.searchParams.get('api-version'))
        return armError(res, 400, 'MissingApiVersionParameter', 'The api-version query parameter (?api-version=) is required for all requests.');
      if (fake.throttleNext > 0) {
        fake.throttleNext--;
        return send(res, 429, { error: { code: 'TooManyRequests', message: 'throttled by the fake' } }, { 'retry-after': '1' });
      }
      let body: Json;
      try {
        body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : {};
      } catch {
        return armError(res, 400, 'InvalidRequestContent', 'body is not JSON');
      }
      const p = u.pathname;
      let m = /^\/subscriptions\/([^/]+)\/providers\/Microsoft\.Compute\/locations\/[^/]+\/operations\/([^/]+)$/i.exec(p);
      if (m) {
        const op = ops.get(m[2]!);
        if (!op) return armError(res, 404, 'NotFound', 'operation not found');
        if (++op.polls < fake.pollsPerOperation) return send(res, 200, { name: m[2], status: 'InProgress', startTime: new Date().toISOString() });
        if (op.polls === fake.pollsPerOperation) op.done();
        if (u.searchParams.get('monitor')) return send(res, 200, {});
        return send(res, 200, { name: m[2], status: 'Succeeded', startTime: new Date().toISOString(), endTime: new Date().toISOString() });
      }
      m = /^\/subscriptions\/([^/]+)\/providers\/Microsoft\.Compute\/snapshots$/i.exec(p);
      if (m && req.method === 'GET') {
        const all = [...snapshots.values()].filter((s) => lower(s.id).startsWith(`/subscriptions/${lower(m![1]!)}/`));
        const skip = Number(u.searchParams.get('$skiptoken') ?? 0);
        const page = all.slice(skip, skip + 3);
        const next = skip + 3 < all.length ? `${base}${p}?api-version=${u.searchParams.get('api-version')}&$skiptoken=${skip + 3}` : undefined;
        return send(res, 200, { value: page, ...(next ? { nextLink: next } : {}) });
      }
      m = /^\/subscriptions\/[^/]+\/resourceGroups\/([^/]+)\/providers\/Microsoft\.Compute\/(snapshots|disks)\/([^/]+)$/i.exec(p);
      if (m) return (lower(m[2]!) === 'snapshots' ? handleSnapshot : handleDisk)(req, res, p, m[1]!, m[3]!, body);
      m =
        /^(\/subscriptions\/[^/]+\/resourceGroups\/[^/]+\/providers\/Microsoft\.Compute\/(?:virtualMachines\/[^/]+|virtualMachineScaleSets\/[^/]+\/virtualMachines\/[^/]+))(?:\/(deallocate|start|restart))?$/i.exec(
          p,
        );
      const machine = m && machines.get(lower(m[1]!));
      if (machine) return handleMachine(req, res, machine, m![2], body);
      return armError(res, 404, 'ResourceNotFound', `no route for ${req.method} ${p} in this fake`);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  fake.url = base;
  fake.credentialEnv = { IDENTITY_ENDPOINT: `${base}/msi/token`, IDENTITY_HEADER: identityHeader, NODE_EXTRA_CA_CERTS: caFile };
  return fake;
}
