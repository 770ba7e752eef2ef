/**
 * Compares the live cluster with a bundle: objects only in the bundle, only in the cluster, moved ones (the
 * bundle has an object at one namespace/name and the cluster has it at another), and changed ones as unified
 * diffs of normalized YAML (server-owned fields removed). Covers the Calico custom resources and the Calico CRDs.
 * Streams the live side page by page and reads bundle files one at a time; only the set of bundle paths and the
 * objects found on one side only are held in memory. Every bundle file diff relies on is read, so a file whose
 * content does not belong at its path is refused (exit 2, naming it) instead of being reported by its path.
 */
import { createTwoFilesPatch } from 'diff';
import { matchesKind, type Bundle } from '../bundle/reader.js';
import { crdPathFor, packedResourcePath, parseResourcePath, resourcePathFor } from '../bundle/paths.js';
import { BadInputError } from '../core/errors.js';
import { isCalicoCrd } from '../export/export.js';
import { POLICY_KINDS, v3PolicyName } from '../calico/policy-names.js';
import type { Reporter } from '../io/host.js';
import { K } from '../kube/builtin.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import { stripServerFields } from '../kube/normalize.js';
import { apiVersionOf, resourceKey, type KubeObject, type ResourceType } from '../kube/types.js';
import { canonicalJson } from '../util/canonical.js';
import { normalizedYaml, type DiffResult, type Ref } from './diff-types.js';
import { diffEtcd } from './etcd-diff.js';
import type { EtcdAccessFlags } from '../calico/etcd-connection.js';

export type { Ref, DiffResult } from './diff-types.js';
export { normalizedYaml } from './diff-types.js';

export interface DiffOptions {
  /** Limit to these kinds (kind, plural or `<plural>.<group>`, case-insensitive; `crds` for the CRDs). */
  kinds?: string[];
  /** Calico's etcd, for a bundle of the etcd datastore, when flags name it instead of calico-config. */
  etcd?: EtcdAccessFlags;
}

const refOf = (o: KubeObject): Ref => ({
  apiVersion: o.apiVersion,
  kind: o.kind,
  ...(o.metadata.namespace ? { namespace: o.metadata.namespace } : {}),
  name: o.metadata.name,
});

export async function diffBundle(client: KubeClient, bundle: Bundle, opts: DiffOptions = {}, reporter?: Reporter): Promise<DiffResult> {
  // A bundle read from Calico's etcd is compared with that etcd.
  if (bundle.manifest.datastore?.type === 'etcd') return diffEtcd(client, bundle, opts);
  const result: DiffResult = { onlyInBundle: [], onlyInCluster: [], changed: [], moved: [], same: 0, compared: [] };
  const kinds = opts.kinds?.length ? opts.kinds : undefined;
  // A mistyped --kinds word must not turn into "no differences".
  const crdWords = ['crds', 'crd', 'customresourcedefinitions', resourceKey(K.crd)];
  const unknownKinds = (kinds ?? []).filter((k) => !crdWords.includes(k.toLowerCase()) && !bundle.manifest.resources.some((r) => matchesKind(r, [k])));
  if (unknownKinds.length)
    throw new BadInputError(`--kinds ${unknownKinds.join(', ')}: no such kind in bundle ${bundle.manifest.id}`, {
      hint: 'see the kinds it holds with: cni-rewind inspect BUNDLE',
    });
  const compare: Compare = async (live, bundlePath, savedYaml) => {
    const a = savedYaml ?? normalizedYaml(await bundle.readObject(bundlePath));
    const b = normalizedYaml(live);
    if (a === b) result.same++;
    else
      result.changed.push({
        ref: refOf(live),
        diff: createTwoFilesPatch(`bundle/${bundlePath}`, `cluster/${bundlePath}`, a, b, undefined, undefined, { context: 3 }),
      });
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
    const liveOnly = await compareLive(client, type, r.key, compare, reporter, (live) => {
      const p = resourcePathFor(live);
      return remaining.delete(p) ? { label: p } : undefined;
    });
    // Read, not just listed by path: readObject refuses a file whose content names another kind, namespace or name.
    const bundleOnly: { path: string; object: KubeObject }[] = [];
    for (const p of [...remaining].sort()) bundleOnly.push({ path: p, object: await bundle.readObject(p) });
    pairMoved(bundleOnly, liveOnly, result);
  }

  // 2. Live Calico kinds that the bundle does not know at all (a CRD added since).
  if (!kinds) {
    const known = new Set(bundle.manifest.resources.map((r) => r.key));
    const liveCrds = (await client.listAll(K.crd)).filter(isCalicoCrd);
    for (const crd of liveCrds) {
      const key = `${crd.spec.names.plural}.${crd.spec.group}`;
      if (known.has(key)) continue;
      const v = (crd.spec.versions ?? []).find((x: any) => x.storage) ?? crd.spec.versions?.[0];
      const type: ResourceType = {
        group: crd.spec.group,
        version: v?.name,
        plural: crd.spec.names.plural,
        kind: crd.spec.names.kind,
        namespaced: crd.spec.scope === 'Namespaced',
      };
      try {
        for await (const o of client.listItems(type)) result.onlyInCluster.push(refOf(o));
      } catch (err) {
        if (!(err instanceof KubeApiError && err.notFound)) throw err;
      }
    }
  }

  // 3. The CRDs themselves (schemas in force), unless narrowed to other kinds.
  if (!kinds || kinds.some((k) => crdWords.includes(k.toLowerCase()))) {
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
 * with their normalized text), then the live list against them; what is on one side only is paired as moved.
 */
async function diffPacked(
  client: KubeClient,
  bundle: Bundle,
  key: string,
  type: ResourceType,
  compare: Compare,
  result: DiffResult,
  reporter: Reporter | undefined,
): Promise<void> {
  const id = (o: KubeObject) => `${o.metadata.namespace ?? ''}/${o.metadata.name}`;
  const saved = new Map<string, { path: string; object: KubeObject; yaml: string }>();
  for await (const bo of bundle.objects({ kinds: [key] })) saved.set(id(bo.object), { path: bo.path, object: bo.object, yaml: normalizedYaml(bo.object) });
  const liveOnly = await compareLive(client, type, key, compare, reporter, (live) => {
    const s = saved.get(id(live));
    if (!s) return undefined;
    saved.delete(id(live));
    return { label: resourcePathFor(live), savedYaml: s.yaml };
  });
  pairMoved(
    [...saved.keys()].sort().map((k) => saved.get(k)!),
    liveOnly,
    result,
  );
}

type Compare = (live: KubeObject, label: string, savedYaml?: string) => Promise<void>;

/**
 * The live objects of one kind, page by page: each the bundle also has (`saved` says so, and under which label)
 * is compared; the others are returned. A kind the cluster no longer serves (its CRD deleted) has none.
 */
async function compareLive(
  client: KubeClient,
  type: ResourceType,
  key: string,
  compare: Compare,
  reporter: Reporter | undefined,
  saved: (live: KubeObject) => { label: string; savedYaml?: string } | undefined,
): Promise<KubeObject[]> {
  const liveOnly: KubeObject[] = [];
  try {
    for await (const page of client.listPages(type, { limit: 500 })) {
      for (const live of page.items) {
        live.apiVersion ??= apiVersionOf(type);
        live.kind ??= type.kind;
        const s = saved(live);
        if (s) await compare(live, s.label, s.savedYaml);
        else liveOnly.push(live);
      }
    }
  } catch (err) {
    if (!(err instanceof KubeApiError && err.notFound)) throw err;
    reporter?.warn('CNR_DIFF_KIND_GONE', `${key} is not served by the cluster any more`);
  }
  return liveOnly;
}

/** The object as compared, without where it is (namespace and name): equal for an object that only moved. */
function contentKey(o: KubeObject): string {
  const s = stripServerFields(o, { ownerUids: true, v3MetadataServerFields: true });
  const { name: _n, namespace: _ns, ...metadata } = s.metadata ?? {};
  return canonicalJson({ ...s, metadata });
}

/**
 * A default-tier policy Calico stored under another name than the bundle has it (3.32's migrator renamed it, or the
 * other way round after a downgrade's rename) is the same policy: compared, not moved nor lost. Returns the bundle
 * objects left; the paired live ones leave `live`.
 */
function withoutRenamedPolicies(
  bundleOnly: { path: string; object: KubeObject }[],
  live: Map<number, KubeObject>,
  result: DiffResult,
): { path: string; object: KubeObject }[] {
  const byV3Name = new Map<string, number>();
  for (const [i, o] of live) if (POLICY_KINDS.has(o.kind)) byV3Name.set(`${o.metadata.namespace ?? ''}/${v3PolicyName(o)}`, i);
  return bundleOnly.filter((b) => {
    if (!POLICY_KINDS.has(b.object.kind)) return true;
    const i = byV3Name.get(`${b.object.metadata.namespace ?? ''}/${v3PolicyName(b.object)}`);
    const o = i === undefined ? undefined : live.get(i);
    if (!o || o.metadata.name === b.object.metadata.name || o.kind !== b.object.kind) return true;
    live.delete(i!);
    const renamed = { ...o, metadata: { ...o.metadata, name: b.object.metadata.name } };
    const [a, c] = [normalizedYaml(b.object), normalizedYaml(renamed)];
    if (a === c) result.same++;
    else
      result.changed.push({
        ref: refOf(o),
        diff: createTwoFilesPatch(`bundle/${b.path}`, `cluster/${resourcePathFor(o)}`, a, c, undefined, undefined, { context: 3 }),
      });
    return false;
  });
}

/**
 * Objects of one type found on one side only: a bundle object and a live one with the same content (another
 * namespace or name), or else with the same name in another namespace, are one object that moved.
 */
export function pairMoved(bundleOnly: { path: string; object: KubeObject }[], liveOnly: KubeObject[], result: DiffResult): void {
  const live = new Map(liveOnly.map((o, i) => [i, o]));
  bundleOnly = withoutRenamedPolicies(bundleOnly, live, result);
  const unpaired: { path: string; object: KubeObject }[] = [];
  const byContent = new Map<string, number[]>();
  for (const [i, o] of live) byContent.set(contentKey(o), [...(byContent.get(contentKey(o)) ?? []), i]);
  for (const b of bundleOnly) {
    const i = byContent.get(contentKey(b.object))?.find((j) => live.has(j));
    if (i === undefined) {
      unpaired.push(b);
      continue;
    }
    result.moved.push({ from: refOf(b.object), to: refOf(live.get(i)!) });
    live.delete(i);
  }
  for (const b of unpaired) {
    const hit = [...live].find(([, o]) => o.metadata.name === b.object.metadata.name);
    if (!hit) {
      result.onlyInBundle.push(refOf(b.object));
      continue;
    }
    const [i, o] = hit;
    const diff = createTwoFilesPatch(`bundle/${b.path}`, `cluster/${resourcePathFor(o)}`, normalizedYaml(b.object), normalizedYaml(o), undefined, undefined, {
      context: 3,
    });
    result.moved.push({ from: refOf(b.object), to: refOf(o), diff });
    live.delete(i);
  }
  for (const o of live.values()) result.onlyInCluster.push(refOf(o));
}

export function hasDifferences(r: DiffResult): boolean {
  return r.onlyInBundle.length + r.onlyInCluster.length + r.changed.length + r.moved.length > 0;
}
