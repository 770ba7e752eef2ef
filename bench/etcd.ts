/**
 * Bench set-up only, never measured: the local control plane's etcd (its HTTP gateway on 127.0.0.1, port = the
 * API server's + 1) written directly, to put N IPAM handles in place or take them away in seconds instead of the
 * 10-20 minutes the API server needs one object at a time for 100k. The API server sees these changes through
 * its etcd watch, as it sees its own writes. The objects have the shape the API server stores (what a client's
 * create leaves: uid, creationTimestamp, generation, managedFields).
 */
import { randomUUID } from 'node:crypto';
import { pool } from '../src/util/pool.js';

const PREFIX = '/registry/crd.projectcalico.org/ipamhandles/';
const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');

/** etcd's HTTP gateway for the local cluster whose API server is `server` (https://127.0.0.1:PORT). */
export function etcdFor(server: string): string {
  const u = new URL(server);
  if (u.hostname !== '127.0.0.1') throw new Error(`bench/etcd: only the local control plane on 127.0.0.1 (got ${server})`);
  return `http://127.0.0.1:${Number(u.port) + 1}`;
}

async function call(etcd: string, api: string, body: unknown): Promise<any> {
  const r = await fetch(`${etcd}/v3/${api}`, { method: 'POST', body: JSON.stringify(body) });
  if (!r.ok) throw new Error(`etcd ${api}: ${r.status} ${await r.text()}`);
  return r.json();
}

/** The stored form of handle `name`, as a create by a client would have left it. */
export function storedHandle(name: string, labels: Record<string, string> = {}): string {
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  return JSON.stringify({
    apiVersion: 'crd.projectcalico.org/v1',
    kind: 'IPAMHandle',
    metadata: {
      creationTimestamp: now,
      generation: 1,
      ...(Object.keys(labels).length ? { labels } : {}),
      managedFields: [
        {
          apiVersion: 'crd.projectcalico.org/v1',
          fieldsType: 'FieldsV1',
          fieldsV1: { 'f:spec': { '.': {}, 'f:block': { '.': {}, 'f:10.128.0.0/26': {} }, 'f:deleted': {}, 'f:handleID': {} } },
          manager: 'calico-ipam',
          operation: 'Update',
          time: now,
        },
      ],
      name,
      uid: randomUUID(),
    },
    spec: { block: { '10.128.0.0/26': 1 }, deleted: false, handleID: name },
  });
}

/** Put handles named `names` in place (128 per etcd transaction, 4 transactions at once). */
export async function putHandles(etcd: string, names: string[], labels: Record<string, string> = {}): Promise<void> {
  const batches: string[][] = [];
  for (let i = 0; i < names.length; i += 128) batches.push(names.slice(i, i + 128));
  await pool(batches, 4, async (batch) => {
    await call(etcd, 'kv/txn', { success: batch.map((n) => ({ request_put: { key: b64(PREFIX + n), value: b64(storedHandle(n, labels)) } })) });
  });
}

/** Remove the IPAM handles whose names start with `namePrefix` from etcd; returns how many there were. */
export async function deleteHandles(etcd: string, namePrefix: string): Promise<number> {
  const from = PREFIX + namePrefix;
  const end = from.slice(0, -1) + String.fromCharCode(from.charCodeAt(from.length - 1) + 1);
  const r = await call(etcd, 'kv/deleterange', { key: b64(from), range_end: b64(end) });
  return Number(r.deleted ?? 0);
}

/** Remove every IPAM handle from etcd. */
export const deleteAllHandles = (etcd: string): Promise<number> => deleteHandles(etcd, '');
