/**
 * `diff` of a bundle exported from Calico's etcd datastore against that etcd now: each v3 resource by its key (kinds
 * of Calico's table, calico/etcd-datastore.ts), compared as normalized YAML (what the store owns removed); each IPAM
 * record by its exact text, shown as indented JSON when it differs. Keys of kinds the bundle never had are not listed.
 */
import { createTwoFilesPatch } from 'diff';
import type { Bundle } from '../bundle/reader.js';
import { openCalicoEtcd, type EtcdAccessFlags } from '../calico/etcd-connection.js';
import {
  ETCD_IPAM_PREFIX,
  ETCD_IPAM_WORDS,
  ETCD_RESOURCES_PREFIX,
  etcdKindNamed,
  parseResourceKey,
  resourceKeyOf,
  type EtcdKind,
} from '../calico/etcd-datastore.js';
import { BadInputError } from '../core/errors.js';
import type { KubeClient } from '../kube/client.js';
import type { KubeObject } from '../kube/types.js';
import { normalizedYaml, type DiffResult, type Ref } from './diff-types.js';

function pretty(raw: string): string {
  try {
    return `${JSON.stringify(JSON.parse(raw), null, 2)}\n`;
  } catch {
    return `${raw}\n`;
  }
}

const ipamRef = (key: string): Ref => ({ apiVersion: 'etcd.cni-rewind.io/v1', kind: 'IPAM', name: key });

const wanted = (kind: EtcdKind | undefined, kindName: string, words: string[] | undefined): boolean => !words || etcdKindNamed(kind, kindName, words);

export async function diffEtcd(client: KubeClient, bundle: Bundle, opts: { kinds?: string[]; etcd?: EtcdAccessFlags } = {}): Promise<DiffResult> {
  const result: DiffResult = { onlyInBundle: [], onlyInCluster: [], changed: [], moved: [], same: 0, compared: [] };
  const words = opts.kinds?.length ? opts.kinds.map((k) => k.toLowerCase()) : undefined;
  const { etcd } = await openCalicoEtcd(client, opts.etcd);

  // Resources: the bundle's by key, then the live keys of the same kinds.
  const fromBundle = new Map<string, KubeObject>();
  const kindsCompared = new Set<string>();
  for await (const { object } of bundle.v3Objects()) {
    const at = resourceKeyOf(object);
    if (!at || !wanted(at.kind, object.kind, words)) continue;
    fromBundle.set(at.key, object);
    kindsCompared.add(at.kind.plural);
  }
  if (words && !words.every((w) => ETCD_IPAM_WORDS.includes(w) || [...fromBundle.values()].some((o) => wanted(resourceKeyOf(o)?.kind, o.kind, [w])))) {
    throw new BadInputError(`--kinds ${opts.kinds!.join(', ')}: not every kind is in bundle ${bundle.manifest.id}`, {
      hint: 'see the kinds it holds with: cni-rewind inspect BUNDLE',
    });
  }
  for (const plural of [...kindsCompared].sort()) {
    result.compared.push(`${plural}.projectcalico.org`);
    for await (const page of etcd.rangePrefix(`${ETCD_RESOURCES_PREFIX}${plural}/`)) {
      for (const kv of page.kvs) {
        const parsed = parseResourceKey(kv.key);
        if (!parsed || !('kind' in parsed)) continue;
        let live: KubeObject;
        try {
          live = JSON.parse(kv.value.toString('utf8'));
        } catch {
          continue;
        }
        live = {
          ...live,
          apiVersion: 'projectcalico.org/v3',
          kind: parsed.kind.kind,
          metadata: { ...live.metadata, name: parsed.name, ...(parsed.namespace ? { namespace: parsed.namespace } : {}) },
        };
        const saved = fromBundle.get(kv.key);
        const ref: Ref = { apiVersion: live.apiVersion, kind: live.kind, ...(parsed.namespace ? { namespace: parsed.namespace } : {}), name: parsed.name };
        if (!saved) {
          result.onlyInCluster.push(ref);
          continue;
        }
        fromBundle.delete(kv.key);
        const a = normalizedYaml(saved);
        const b = normalizedYaml(live);
        if (a === b) result.same++;
        else result.changed.push({ ref, diff: createTwoFilesPatch(`bundle${kv.key}`, `etcd${kv.key}`, a, b, undefined, undefined, { context: 3 }) });
      }
    }
  }
  for (const o of fromBundle.values())
    result.onlyInBundle.push({
      apiVersion: o.apiVersion,
      kind: o.kind,
      ...(o.metadata.namespace ? { namespace: o.metadata.namespace } : {}),
      name: o.metadata.name,
    });

  // IPAM records, by their exact text.
  if (!words || words.some((w) => ETCD_IPAM_WORDS.includes(w))) {
    result.compared.push('ipam.etcd');
    const saved = new Map<string, string>();
    for await (const { object } of bundle.etcdIpamRecords()) {
      const raw = (object as { raw?: unknown }).raw;
      if (typeof raw === 'string') saved.set(object.metadata.name, raw);
    }
    for await (const page of etcd.rangePrefix(ETCD_IPAM_PREFIX)) {
      for (const kv of page.kvs) {
        const live = kv.value.toString('utf8');
        const was = saved.get(kv.key);
        if (was === undefined) {
          result.onlyInCluster.push(ipamRef(kv.key));
          continue;
        }
        saved.delete(kv.key);
        if (was === live) result.same++;
        else
          result.changed.push({
            ref: ipamRef(kv.key),
            diff: createTwoFilesPatch(`bundle${kv.key}`, `etcd${kv.key}`, pretty(was), pretty(live), undefined, undefined, { context: 3 }),
          });
      }
    }
    for (const key of saved.keys()) result.onlyInBundle.push(ipamRef(key));
  }
  return result;
}
