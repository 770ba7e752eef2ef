/**
 * IPAM of the etcd datastore as live state, judged record by record before restore writes (etcd-restore.ts):
 * - a block that is missing is created with the allocations whose pod still exists (tunnel addresses always);
 * - a block that exists and differs (Calico re-claimed the same CIDR after the loss: libcalico-go seeds a node's
 *   first block from its hostname) gets the bundle's allocations back address by address, as the Kubernetes
 *   datastore's restore does (ipam-merge.ts mergeBlock): a free ordinal is allocated again to the bundle's handle; an
 *   ordinal another handle holds now is a duplicate IP, reported, never overwritten;
 * - a handle is created only when an allocation of it is kept; affinities and config only when missing.
 * Values are parsed without losing 64-bit integers (a block's sequence numbers) and written back as exact text when
 * nothing in them changed.
 */
import { ipamRecordType } from '../calico/etcd-datastore.js';
import type { EtcdKv } from '../etcd/gateway.js';
import type { KubeObject } from '../kube/types.js';
import { duplicateLine, mergeBlock, withoutUnused, type KeepAllocation } from './ipam-merge.js';

const INT64 = '\u0000int64:';

/** JSON.parse, with every integer literal of more than 15 digits kept as its digits (a marked string). */
export function parseLossless(text: string): any {
  let out = '';
  let i = 0;
  // Walk the text so that digits inside strings are never touched.
  while (i < text.length) {
    const c = text[i]!;
    if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      out += text.slice(i, j + 1);
      i = j + 1;
      continue;
    }
    const m = /^-?\d{16,}(?![.eE\d])/.exec(text.slice(i, i + 40));
    if (m && /[:[,\s]/.test(text[i - 1] ?? ',')) {
      out += JSON.stringify(`${INT64}${m[0]}`);
      i += m[0].length;
      continue;
    }
    out += c;
    i++;
  }
  return JSON.parse(out);
}

/** JSON.stringify that writes parseLossless's marked integers back as the integers they were. */
export function stringifyLossless(value: unknown): string {
  return JSON.stringify(value).replace(/"\\u0000int64:(-?\d+)"/g, '$1');
}

export interface IpamDecision {
  key: string;
  action: 'create' | 'update' | 'unchanged' | 'skip' | 'unsupported';
  reason?: string;
  /** What to write (exact bundle text, or a merged block). */
  value: string;
  modRevision?: string;
}

/** `keep` for an allocation: its pod exists (namespace/name of the CNI plugin's attributes), or it is no pod's. */
export type PodExists = (namespace: string, pod: string) => Promise<boolean>;

/** Calico's keys as etcd held them when the plan read them (one paged read per prefix, not one request per key). */
export type LiveKeys = ReadonlyMap<string, EtcdKv>;

export async function planEtcdIpam(
  live: LiveKeys,
  records: AsyncIterable<{ object: KubeObject }>,
  podExists: PodExists,
): Promise<{ decisions: IpamDecision[]; duplicates: string[] }> {
  const decisions: IpamDecision[] = [];
  const duplicates: string[] = [];
  const handles: { key: string; raw: string }[] = [];
  const keptHandles = new Set<string>();
  const used = async (attr: { secondary?: Record<string, string> }): Promise<boolean> =>
    !attr.secondary?.pod || podExists(attr.secondary.namespace ?? '', attr.secondary.pod);
  for await (const { object } of records) {
    const key = object.metadata.name;
    const type = ipamRecordType(key);
    const raw = (object as { raw?: unknown }).raw;
    let bundle: any;
    try {
      bundle = typeof raw === 'string' ? parseLossless(raw) : undefined;
    } catch {
      bundle = undefined;
    }
    if (!type || typeof raw !== 'string' || !bundle || typeof bundle !== 'object') {
      decisions.push({ key, action: 'unsupported', reason: 'not an IPAM block, handle, affinity or config key with a JSON value', value: '' });
      continue;
    }
    if (type === 'handle') {
      handles.push({ key, raw });
      continue;
    }
    const now = live.get(key);
    const liveText = now?.value.toString('utf8');
    if (liveText === raw) {
      decisions.push({ key, action: 'unchanged', value: raw });
      if (type === 'block') for (const a of bundle.attributes ?? []) if (a?.handle_id) keptHandles.add(a.handle_id);
      continue;
    }
    if (type !== 'block') {
      decisions.push(
        now
          ? { key, action: 'skip', reason: 'live IPAM state is kept: this record exists and differs from the backup', value: raw }
          : { key, action: 'create', value: raw },
      );
      continue;
    }
    // Which of the bundle's allocations are still used: decided now, once per pod.
    const usedNow = new Map<number, boolean>();
    for (const [ordinal, index] of ((bundle.allocations ?? []) as (number | null)[]).entries())
      if (index !== null && index !== undefined) usedNow.set(ordinal, await used(bundle.attributes?.[index] ?? {}));
    const keep: KeepAllocation = (attr) => {
      const ordinal = ((bundle.allocations ?? []) as (number | null)[]).findIndex((i) => i !== null && bundle.attributes?.[i!]?.handle_id === attr.handle_id);
      return usedNow.get(ordinal) ?? true;
    };
    const asObject = (spec: unknown): KubeObject => ({ apiVersion: 'v1', kind: 'IPAMBlock', metadata: { name: key }, spec }) as KubeObject;
    if (!now) {
      const { block, unused } = withoutUnused(asObject(bundle), keep);
      for (const a of block.spec.attributes ?? []) if (a?.handle_id) keptHandles.add(a.handle_id);
      decisions.push({
        key,
        action: 'create',
        value: unused.length ? stringifyLossless(block.spec) : raw,
        ...(unused.length ? { reason: `${unused.length} allocation(s) of pods that are gone left free` } : {}),
      });
      continue;
    }
    const liveBlock = parseLossless(liveText!);
    const merge = mergeBlock(asObject(liveBlock), asObject(bundle), undefined, keep);
    duplicates.push(...merge.duplicates.map(duplicateLine));
    for (const o of [...merge.restored, ...merge.held]) {
      const index = bundle.allocations[o];
      if (bundle.attributes?.[index]?.handle_id) keptHandles.add(bundle.attributes[index].handle_id);
    }
    decisions.push(
      merge.restored.length
        ? {
            key,
            action: 'update',
            reason: `re-created since the backup: ${merge.restored.length} allocation(s) put back${merge.duplicates.length ? `, ${merge.duplicates.length} duplicate IP(s)` : ''}`,
            value: stringifyLossless(merge.block.spec),
            modRevision: now.modRevision,
          }
        : { key, action: 'skip', reason: 'live IPAM state is kept: nothing of the backup to put back in this block', value: raw },
    );
  }
  for (const h of handles) {
    const handleId = h.key.slice(h.key.lastIndexOf('/') + 1);
    const now = live.get(h.key);
    if (now) {
      decisions.push({ key: h.key, action: now.value.toString('utf8') === h.raw ? 'unchanged' : 'skip', reason: 'live IPAM state is kept', value: h.raw });
    } else if (!keptHandles.has(handleId)) {
      decisions.push({ key: h.key, action: 'skip', reason: 'no allocation of this handle is kept (its pod is gone)', value: h.raw });
    } else decisions.push({ key: h.key, action: 'create', value: h.raw });
  }
  return { decisions, duplicates };
}
