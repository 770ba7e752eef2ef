/**
 * Compares the live cluster with a bundle: objects only in the bundle, only in the cluster, and changed
 * ones as unified diffs of normalized YAML (server-owned fields removed). Covers the Calico custom resources
 * and the Calico CRDs. Streams the live side page by page and reads bundle files one at a time; only the
 * set of bundle paths is held in memory.
 */
import { createTwoFilesPatch } from 'diff';
import { matchesKind, type Bundle } from '../bundle/reader.js';
import { crdPathFor, packedResourcePath, parseResourcePath, resourcePathFor } from '../bundle/paths.js';
import { dumpYaml } from '../bundle/writer.js';
import { BadInputError } from '../errors.js';
import { isCalicoCrd } from '../export/export.js';
import type { Reporter } from '../io/host.js';
import { K } from '../kube/builtin.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import { stripServerFields } from '../kube/normalize.js';
import { apiVersionOf, resourceKey, type KubeObject, type ResourceType } from '../kube/types.js';

export interface Ref {
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
}

export interface DiffResult {
  onlyInBundle: Ref[];
  onlyInCluster: Ref[];
  changed: { ref: Ref; diff: string }[];
  /** Objects compared and found equal. */
  same: number;
  /** Resource types compared (`<plural>.<group>`). */
  compared: string[];
}

export interface DiffOptions {
  /** Limit to these kinds (kind, plural or `<plural>.<group>`, case-insensitive; `crds` for the CRDs). */
  kinds?: string[];
}

const refOf = (o: KubeObject): Ref => ({ apiVersion: o.apiVersion, kind: o.kind, ...(o.metadata.namespace ? { namespace: o.metadata.namespace } : {}), name: o.metadata.name });

/** YAML as compared: server fields gone, keys sorted so field order never shows as a change. */
export function normalizedYaml(o: KubeObject): string {
  return dumpYaml(sortKeys(stripServerFields(o, { ownerUids: true })));
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys((v as any)[k])]));
  return v;
}

export async function diffBundle(client: KubeClient, bundle: Bundle, opts: DiffOptions = {}, reporter?: Reporter): Promise<DiffResult> {
  const result: DiffResult = { onlyInBundle: [], onlyInCluster: [], changed: [], same: 0, compared: [] };
  const kinds = opts.kinds?.length ? opts.kinds : undefined;
  // A mistyped --kinds word must not turn into "no differences".
  const crdWords = ['crds', 'crd', 'customresourcedefinitions', resourceKey(K.crd)];
  const unknownKinds = (kinds ?? []).filter((k) => !crdWords.includes(k.toLowerCase()) && !bundle.manifest.resources.some((r) => matchesKind(r, [k])));
  if (unknownKinds.length) throw new BadInputError(`--kinds ${unknownKinds.join(', ')}: no such kind in bundle ${bundle.manifest.id}`, { hint: 'see the kinds it holds with: cni-rewind inspect BUNDLE' });
  const compare = async (live: KubeObject, bundlePath: string, savedYaml?: string) => {
    const a = savedYaml ?? normalizedYaml(await bundle.readObject(bundlePath));
    const b = normalizedYaml(live);
    if (a === b) result.same++;
    else result.changed.push({ ref: refOf(live), diff: createTwoFilesPatch(`bundle/${bundlePath}`, `cluster/${bundlePath}`, a, b, undefined, undefined, { context: 3 }) });
  };

  // 1. Custom resources, one resource type at a time, as recorded in the bundle.
  for (const r of bundle.manifest.resources) {
    if (kinds && !matchesKind(r, kinds)) continue;
    result.compared.push(r.key);
    const type: ResourceType = { group: r.group, version: r.version, plural: r.plural, kind: r.kind, namespaced: r.namespaced };
    if (Number(bundle.manifest.formatVersion.split('.')[0]) >= 2 && Object.hasOwn(bundle.manifest.files, packedResourcePath(r.group, r.kind))) {
      await diffPacked(client, bundle, r.key, type, compare, result, reporter);
      continue;
    }
    const remaining = new Set(
      Object.keys(bundle.manifest.files).filter((f) => {
        const p = parseResourcePath(f);
        return p?.group === r.group && p.kind === r.kind;
      }),
    );
    try {
      for await (const page of client.listPages(type, { limit: 500 })) {
        for (const live of page.items) {
          live.apiVersion ??= apiVersionOf(type);
          live.kind ??= type.kind;
          const p = resourcePathFor(live);
          if (remaining.delete(p)) await compare(live, p);
          else result.onlyInCluster.push(refOf(live));
        }
      }
    } catch (err) {
      // The kind is gone from the cluster (its CRD deleted): everything the bundle holds of it is missing.
      if (!(err instanceof KubeApiError && err.notFound)) throw err;
      reporter?.warn('CNR_DIFF_KIND_GONE', `${r.key} is not served by the cluster any more`);
    }
    for (const p of [...remaining].sort()) result.onlyInBundle.push(refFromPath(p, type));
  }

  // 2. Live Calico kinds that the bundle does not know at all (a CRD added since).
  if (!kinds) {
    const known = new Set(bundle.manifest.resources.map((r) => r.key));
    const liveCrds = (await client.listAll(K.crd)).filter(isCalicoCrd);
    for (const crd of liveCrds) {
      const key = `${crd.spec.names.plural}.${crd.spec.group}`;
      if (known.has(key)) continue;
      const v = (crd.spec.versions ?? []).find((x: any) => x.storage) ?? crd.spec.versions?.[0];
      const type: ResourceType = { group: crd.spec.group, version: v?.name, plural: crd.spec.names.plural, kind: crd.spec.names.kind, namespaced: crd.spec.scope === 'Namespaced' };
      try {
        for await (const o of client.listItems(type)) result.onlyInCluster.push(refOf(o));
      } catch (err) {
        if (!(err instanceof KubeApiError && err.notFound)) throw err;
      }
    }
  }

  // 3. The CRDs themselves (schemas in force), unless narrowed to other kinds.
  if (!kinds || kinds.some((k) => ['crds', 'crd', 'customresourcedefinitions', resourceKey(K.crd)].includes(k.toLowerCase()))) {
    result.compared.push(resourceKey(K.crd));
    const remaining = new Set(Object.keys(bundle.manifest.files).filter((f) => f.startsWith('crds/')));
    for (const live of (await client.listAll(K.crd)).filter(isCalicoCrd)) {
      live.apiVersion ??= apiVersionOf(K.crd);
      live.kind ??= K.crd.kind;
      const p = crdPathFor(live);
      if (remaining.delete(p)) await compare(live, p);
      else result.onlyInCluster.push(refOf(live));
    }
    for (const p of [...remaining].sort()) {
      const o = await bundle.readObject(p);
      result.onlyInBundle.push(refOf(o));
    }
  }
  return result;
}

/**
 * A packed kind (format 2): the bundle's objects of the kind, normalized, by namespace/name (one kind at a time,
 * as text: a few hundred bytes per object), then the live list against them.
 */
async function diffPacked(
  client: KubeClient,
  bundle: Bundle,
  key: string,
  type: ResourceType,
  compare: (live: KubeObject, label: string, savedYaml: string) => Promise<void>,
  result: DiffResult,
  reporter: Reporter | undefined,
): Promise<void> {
  const id = (o: KubeObject) => `${o.metadata.namespace ?? ''}/${o.metadata.name}`;
  const saved = new Map<string, { ref: Ref; yaml: string }>();
  for await (const bo of bundle.objects({ kinds: [key] })) saved.set(id(bo.object), { ref: refOf(bo.object), yaml: normalizedYaml(bo.object) });
  try {
    for await (const page of client.listPages(type, { limit: 500 })) {
      for (const live of page.items) {
        live.apiVersion ??= apiVersionOf(type);
        live.kind ??= type.kind;
        const s = saved.get(id(live));
        if (!s) {
          result.onlyInCluster.push(refOf(live));
          continue;
        }
        saved.delete(id(live));
        await compare(live, resourcePathFor(live), s.yaml);
      }
    }
  } catch (err) {
    if (!(err instanceof KubeApiError && err.notFound)) throw err;
    reporter?.warn('CNR_DIFF_KIND_GONE', `${key} is not served by the cluster any more`);
  }
  for (const k of [...saved.keys()].sort()) result.onlyInBundle.push(saved.get(k)!.ref);
}

function refFromPath(p: string, type: ResourceType): Ref {
  const parsed = parseResourcePath(p)!;
  return { apiVersion: apiVersionOf(type), kind: type.kind, ...(parsed.namespace ? { namespace: parsed.namespace } : {}), name: parsed.name };
}

export function hasDifferences(r: DiffResult): boolean {
  return r.onlyInBundle.length + r.onlyInCluster.length + r.changed.length > 0;
}
