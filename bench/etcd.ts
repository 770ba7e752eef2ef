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
const BLOCK_PREFIX = '/registry/crd.projectcalico.org/ipamblocks/';
/** Addresses per block: Calico's default IPv4 block size, /26. */
const BLOCK_SIZE = 64;
/** 10.128.0.0 as a number: the handles' addresses are 10.128.0.0 + their index (10.128.0.0/10 holds 4M). */
const BASE = (10 << 24) | (128 << 16);

const ipv4 = (n: number) => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');

/**
 * The /26 block that holds the address of handle number `index`, as Calico names and describes it: handles 0-63
 * in 10.128.0.0/26, 64-127 in 10.128.0.64/26, and so on.
 */
export function blockOf(index: number): { cidr: string; name: string; ordinal: number } {
  const start = BASE + Math.floor(index / BLOCK_SIZE) * BLOCK_SIZE;
  const cidr = `${ipv4(start)}/26`;
  return { cidr, name: cidr.replace(/[./]/g, '-'), ordinal: index % BLOCK_SIZE };
}
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
export function storedHandle(name: string, labels: Record<string, string> = {}, cidr = '10.128.0.0/26'): string {
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
          fieldsV1: { 'f:spec': { '.': {}, 'f:block': { '.': {}, [`f:${cidr}`]: {} }, 'f:deleted': {}, 'f:handleID': {} } },
          manager: 'calico-ipam',
          operation: 'Update',
          time: now,
        },
      ],
      name,
      uid: randomUUID(),
    },
    spec: { block: { [cidr]: 1 }, deleted: false, handleID: name },
  });
}

/**
 * The stored form of the IPAMBlock `cidr` (named `name`) whose addresses are allocated to `handles` in order, as
 * calico-ipam leaves a block after as many CNI ADDs on one node.
 */
export function storedBlock(name: string, cidr: string, handles: string[]): string {
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const allocations = Array.from({ length: BLOCK_SIZE }, (_, i) => (i < handles.length ? i : null));
  return JSON.stringify({
    apiVersion: 'crd.projectcalico.org/v1',
    kind: 'IPAMBlock',
    metadata: { creationTimestamp: now, generation: 1, name, uid: randomUUID() },
    spec: {
      cidr,
      affinity: 'host:bench-node',
      strictAffinity: false,
      allocations,
      unallocated: Array.from({ length: BLOCK_SIZE - handles.length }, (_, i) => handles.length + i),
      attributes: handles.map((h) => ({ handle_id: h, secondary: { namespace: 'bench', node: 'bench-node', pod: h.slice(h.lastIndexOf('.') + 1) } })),
      deleted: false,
    },
  });
}

/** Write [key, value] pairs to etcd: 128 per transaction, 4 transactions at once. */
async function putAll(etcd: string, kvs: [string, string][]): Promise<void> {
  const batches: [string, string][][] = [];
  for (let i = 0; i < kvs.length; i += 128) batches.push(kvs.slice(i, i + 128));
  await pool(batches, 4, async (batch) => {
    await call(etcd, 'kv/txn', { success: batch.map(([k, v]) => ({ request_put: { key: b64(k), value: b64(v) } })) });
  });
}

/** Put handles named `names` in place; handle number i names the block `blockOf(i)`. */
export async function putHandles(etcd: string, names: string[], labels: Record<string, string> = {}): Promise<void> {
  await putAll(
    etcd,
    names.map((n, i) => [PREFIX + n, storedHandle(n, labels, blockOf(i).cidr)]),
  );
}

/** Put in place the IPAMBlocks that allocate one address to each of `names` (handle number i at `blockOf(i)`). */
export async function putBlocks(etcd: string, names: string[]): Promise<void> {
  const kvs: [string, string][] = [];
  for (let i = 0; i < names.length; i += BLOCK_SIZE) {
    const b = blockOf(i);
    kvs.push([BLOCK_PREFIX + b.name, storedBlock(b.name, b.cidr, names.slice(i, i + BLOCK_SIZE))]);
  }
  await putAll(etcd, kvs);
}

/** Remove every IPAMBlock from etcd; returns how many there were. */
export const deleteAllBlocks = (etcd: string): Promise<number> => deleteRange(etcd, BLOCK_PREFIX);

/** Remove the IPAM handles whose names start with `namePrefix` from etcd; returns how many there were. */
export const deleteHandles = (etcd: string, namePrefix: string): Promise<number> => deleteRange(etcd, PREFIX + namePrefix);

async function deleteRange(etcd: string, from: string): Promise<number> {
  const end = from.slice(0, -1) + String.fromCharCode(from.charCodeAt(from.length - 1) + 1);
  const r = await call(etcd, 'kv/deleterange', { key: b64(from), range_end: b64(end) });
  return Number(r.deleted ?? 0);
}

/** Remove every IPAM handle from etcd. */
export const deleteAllHandles = (etcd: string): Promise<number> => deleteHandles(etcd, '');
