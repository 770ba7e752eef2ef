/**
 * Export of a Calico that keeps its data in etcd (calico-etcd.yaml): every projectcalico.org/v3 resource and every IPAM
 * record read from Calico's etcd (endpoints and client certificate as calico-node has them, calico/etcd-connection.ts)
 * at one revision, into the same bundle: the resources as v3 objects in `v3/<Kind>.jsonl`, the IPAM records in
 * `etcd/ipam.jsonl`, the revision in the manifest. Streamed: one page in memory, one packed file open at a time.
 */
import { packedV3Path, ETCD_IPAM_PATH } from '../bundle/paths.js';
import type { BundleWriter, PackedFileWriter } from '../bundle/writer.js';
import { openCalicoEtcd, type EtcdAccessFlags, type OpenedCalicoEtcd } from '../calico/etcd-connection.js';
import {
  CALICO_V3_API_VERSION,
  ETCD_IPAM_PREFIX,
  ETCD_RESOURCES_PREFIX,
  hasUnsafeInteger,
  ipamRecord,
  ipamRecordType,
  parseResourceKey,
  type IpamRecordType,
} from '../calico/etcd-datastore.js';
import { RefusedError } from '../core/errors.js';
import type { Reporter } from '../io/host.js';
import type { KubeClient } from '../kube/client.js';
import type { KubeObject } from '../kube/types.js';

/** Counts of IPAM records in the manifest, keyed like the Kubernetes datastore's kinds (`<what>.ipam.etcd`). */
export const IPAM_COUNT_KEYS: Record<IpamRecordType, string> = {
  block: 'blocks.ipam.etcd',
  handle: 'handles.ipam.etcd',
  affinity: 'affinities.ipam.etcd',
  config: 'config.ipam.etcd',
};

function parseJson(value: Buffer): unknown {
  try {
    return JSON.parse(value.toString('utf8'));
  } catch {
    return undefined;
  }
}

/** The object stored at a resource key, with its kind, name and namespace as the key says (the key is what Calico reads). */
function resourceObject(kind: string, name: string, namespace: string | undefined, value: unknown): KubeObject | undefined {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const v = value as KubeObject;
  const metadata = { ...(v.metadata ?? {}), name, ...(namespace ? { namespace } : {}) };
  if (!namespace) delete (metadata as { namespace?: string }).namespace;
  return { ...v, apiVersion: CALICO_V3_API_VERSION, kind, metadata };
}

export async function exportEtcd(
  client: KubeClient,
  writer: BundleWriter,
  opts: { pageSize: number; access?: EtcdAccessFlags; opened?: OpenedCalicoEtcd },
  reporter: Reporter,
): Promise<void> {
  const m = writer.manifest;
  const { etcd, endpoints, revision: openedAt } = opts.opened ?? (await openCalicoEtcd(client, opts.access));
  // Opened by backup before its snapshots: read at the revision of now, not at one taken minutes ago.
  const revision = opts.opened ? await etcd.revision() : openedAt;
  reporter.info(
    'CNR_EXPORT_ETCD',
    `reading Calico's etcd datastore at revision ${revision} (${endpoints.length} endpoint${endpoints.length === 1 ? '' : 's'})`,
  );

  // Keys come in key order, so each plural's keys are contiguous: one packed file per kind, one open at a time.
  let current: { plural: string; kind: string; pack: PackedFileWriter; count: number } | undefined;
  const kindsWritten = new Set<string>();
  const unreadable = new Map<string, number>();
  let resources = 0;
  const closeKind = async () => {
    if (!current) return;
    await current.pack.close();
    m.counts[`${current.plural}.projectcalico.org`] = current.count;
    reporter.progress({ id: current.plural, label: `export ${current.plural} (etcd)`, current: current.count, done: true });
    current = undefined;
  };
  for await (const page of etcd.rangePrefix(ETCD_RESOURCES_PREFIX, opts.pageSize, revision)) {
    for (const kv of page.kvs) {
      const parsed = parseResourceKey(kv.key);
      const value = parseJson(kv.value);
      let obj: KubeObject | undefined;
      let plural: string;
      if (parsed && 'kind' in parsed) {
        plural = parsed.kind.plural;
        obj = resourceObject(parsed.kind.kind, parsed.name, parsed.namespace, value);
      } else {
        // A kind this release of cni-rewind does not know: kept in the bundle as it is (restore will not write it).
        plural = parsed && 'unknownPlural' in parsed ? parsed.unknownPlural : kv.key;
        const v = value as KubeObject | undefined;
        const name = kv.key.split('/').pop()!;
        obj = v && typeof v.kind === 'string' && /^[A-Za-z0-9]+$/.test(v.kind) ? resourceObject(v.kind, name, v.metadata?.namespace, v) : undefined;
      }
      if (!obj) {
        unreadable.set(plural, (unreadable.get(plural) ?? 0) + 1);
        continue;
      }
      if (hasUnsafeInteger(kv.value.toString('utf8'))) m.notes.push(`etcd: ${kv.key} holds an integer beyond 2^53, kept only to 15-16 digits`);
      if (current?.plural !== plural) {
        await closeKind();
        if (kindsWritten.has(obj.kind)) {
          unreadable.set(plural, (unreadable.get(plural) ?? 0) + 1);
          continue;
        }
        kindsWritten.add(obj.kind);
        current = { plural, kind: obj.kind, pack: await writer.openPacked(packedV3Path(obj.kind)), count: 0 };
      }
      await current.pack.write(obj);
      current.count++;
      resources++;
    }
  }
  await closeKind();
  for (const [plural, n] of unreadable) m.notes.push(`etcd: ${n} value(s) under ${ETCD_RESOURCES_PREFIX}${plural} are not Calico v3 JSON; not exported`);
  if (resources === 0) {
    throw new RefusedError(`Calico's etcd at ${endpoints.join(',')} holds no Calico resource under ${ETCD_RESOURCES_PREFIX}: nothing was exported`, {
      hint: 'check that calico-config (or --etcd-endpoints) names the etcd calico-node uses',
    });
  }

  // IPAM: blocks, handles, host affinities, config; one packed file.
  let ipam: PackedFileWriter | undefined;
  const ipamCounts = new Map<IpamRecordType, number>();
  let ipamOther = 0;
  for await (const page of etcd.rangePrefix(ETCD_IPAM_PREFIX, opts.pageSize, revision)) {
    for (const kv of page.kvs) {
      const type = ipamRecordType(kv.key);
      const value = parseJson(kv.value);
      if (!type || value === undefined) {
        ipamOther++;
        continue;
      }
      ipam ??= await writer.openPacked(ETCD_IPAM_PATH);
      await ipam.write(ipamRecord(kv.key, kv.value.toString('utf8')));
      ipamCounts.set(type, (ipamCounts.get(type) ?? 0) + 1);
    }
  }
  if (ipam) await ipam.close();
  for (const [type, key] of Object.entries(IPAM_COUNT_KEYS)) m.counts[key] = ipamCounts.get(type as IpamRecordType) ?? 0;
  if (ipamOther) m.notes.push(`etcd: ${ipamOther} key(s) under ${ETCD_IPAM_PREFIX} are not IPAM blocks, handles, affinities or config; not exported`);
  m.datastore = { type: 'etcd', revision };
}
