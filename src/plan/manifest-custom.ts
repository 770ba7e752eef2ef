/**
 * Edits of a calico.yaml install. calico.yaml is meant to be edited before it is applied (calico-node env such as
 * CALICO_IPV4POOL_CIDR, IP_AUTODETECTION_METHOD, FELIX_*; `veth_mtu` or `calico_backend` in calico-config; images
 * from a private registry), and Calico's upgrade procedure for manifest installs says to make the same edits in
 * the new release's calico.yaml. Replacing the objects with the target's as released would undo them silently
 * (another autodetected node address, another MTU or backend, images an air-gapped cluster cannot pull).
 *
 * The plan finds the edits by comparing the live objects with the *current* release's calico.yaml (three-way: what
 * the user changed, not what differs between two releases), records them in the plan, and apply-calico-manifest
 * writes them into the target's objects. Without the current release's calico.yaml the edits cannot be told from
 * release defaults: the plan says so and the target is applied as released.
 */
import { imageTag, tagVersion } from '../calico/knowledge.js';
import { loadRelease, type Release } from '../calico/release.js';
import { errorMessage, RefusedError } from '../core/errors.js';
import { K } from '../kube/builtin.js';
import type { KubeClient } from '../kube/client.js';
import type { KubeObject } from '../kube/types.js';
import { canonicalJson } from '../util/canonical.js';
import { refusePinnedWithoutVersion } from './operator-mirror.js';
import { MANIFEST_CONTAINER_FIELDS, type ManifestTransform, type PlanFinding } from './types.js';

const getField = (c: any, f: string) => f.split('.').reduce((o, k) => o?.[k], c);
function setField(c: any, f: string, v: unknown): void {
  const parts = f.split('.');
  let o = c;
  for (const k of parts.slice(0, -1)) o = o[k] ??= {};
  if (v === undefined) delete o[parts[parts.length - 1]!];
  else o[parts[parts.length - 1]!] = structuredClone(v);
}

export const MANIFEST_NS = 'kube-system';
const DS = 'calico-node';
const CONFIG = 'calico-config';

const find = (objs: KubeObject[], kind: string, name: string) => objs.find((o) => o.kind === kind && o.metadata.name === name);
const nodeContainer = (ds: KubeObject | undefined) => (ds?.spec?.template?.spec?.containers ?? []).find((c: any) => c.name === 'calico-node');
const repo = (image: string) => image.split('@')[0]!.replace(/:[^/:]+$/, '');
const containersOf = (o: KubeObject | undefined): any[] => [...(o?.spec?.template?.spec?.initContainers ?? []), ...(o?.spec?.template?.spec?.containers ?? [])];
/** An env entry as written in calico.yaml: the API server defaults `fieldRef.apiVersion: v1`, which is no edit. */
function envKey(e: any): string {
  const c = structuredClone(e);
  if (c.valueFrom?.fieldRef?.apiVersion === 'v1') delete c.valueFrom.fieldRef.apiVersion;
  return canonicalJson(c);
}
const short = (v: unknown) => {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
};

/** The edits of the live objects relative to the current release's calico.yaml, with a finding describing them. */
export function findManifestEdits(
  live: { ds?: KubeObject; config?: KubeObject; workloads: KubeObject[] },
  current: { version: string; objects: KubeObject[]; /** The release file the objects are, as the finding names it. */ file?: string },
): { transform: ManifestTransform; finding?: PlanFinding } {
  const file = current.file ?? 'calico.yaml';
  const t: ManifestTransform = { from: current.version, calicoNodeEnv: { set: [], remove: [] }, calicoConfig: {}, repositories: {}, containerFields: [] };
  const details: string[] = [];
  const objects = new Set<string>();

  const relEnv: any[] = nodeContainer(find(current.objects, 'DaemonSet', DS))?.env ?? [];
  const liveEnv: any[] = nodeContainer(live.ds)?.env ?? [];
  const relByName = new Map(relEnv.map((e) => [e.name, e]));
  for (const e of liveEnv) {
    const r = relByName.get(e.name);
    if (r && envKey(r) === envKey(e)) continue;
    t.calicoNodeEnv.set.push(e);
    details.push(`calico-node env ${e.name}=${short(e.value ?? e.valueFrom)} (${current.version} ${file}: ${r ? short(r.value ?? r.valueFrom) : 'not set'})`);
    objects.add(`DaemonSet/${MANIFEST_NS}/${DS}`);
  }
  const liveNames = new Set(liveEnv.map((e) => e.name));
  for (const r of relEnv) {
    if (liveNames.has(r.name)) continue;
    t.calicoNodeEnv.remove.push(r.name);
    details.push(`calico-node env ${r.name} removed (${current.version} ${file}: ${short(r.value ?? r.valueFrom)})`);
    objects.add(`DaemonSet/${MANIFEST_NS}/${DS}`);
  }

  const relData: Record<string, string> = find(current.objects, 'ConfigMap', CONFIG)?.data ?? {};
  for (const [k, v] of Object.entries((live.config?.data ?? {}) as Record<string, string>)) {
    if (relData[k] === v) continue;
    t.calicoConfig[k] = v;
    details.push(`calico-config ${k}=${short(v)} (${current.version} ${file}: ${k in relData ? short(relData[k]) : 'not set'})`);
    objects.add(`ConfigMap/${MANIFEST_NS}/${CONFIG}`);
  }

  // Images pulled from another registry (same release tag): the target's images come from there too.
  for (const w of live.workloads) {
    const rel = find(current.objects, w.kind, w.metadata.name);
    const relByContainer = new Map(containersOf(rel).map((c) => [c.name, c.image as string]));
    const relContainers = new Map(containersOf(rel).map((c) => [c.name, c]));
    for (const c of containersOf(w)) {
      const rc = relContainers.get(c.name);
      for (const f of rc ? MANIFEST_CONTAINER_FIELDS : []) {
        const v = getField(c, f);
        if (canonicalJson(v ?? null) === canonicalJson(getField(rc, f) ?? null)) continue;
        t.containerFields!.push({ workload: `${w.kind}/${w.metadata.name}`, container: c.name, field: f, value: v });
        details.push(
          `${w.metadata.name} container ${c.name} ${f}: ${short(v ?? 'removed')} (${current.version} ${file}: ${short(getField(rc, f) ?? 'not set')})`,
        );
        objects.add(`${w.kind}/${MANIFEST_NS}/${w.metadata.name}`);
      }
    }
    for (const c of containersOf(w)) {
      const r = relByContainer.get(c.name);
      if (!r || !c.image || c.image === r || repo(c.image) === repo(r)) continue;
      const tag = imageTag(c.image);
      // Pinned by digest alone: the release's image in the mirror (the digest names no tag to compare).
      const digestOnly = tag === undefined && c.image.includes('@');
      if (!digestOnly && tag !== imageTag(r)) {
        // A mirror that retags the release (`v3.28.1-mirror.1`) names the target's images its own way: not ours to guess.
        if (tag && tagVersion(tag)?.version === imageTag(r)) throw retaggedMirror(c.image, imageTag(r)!, current.version);
        continue;
      }
      if (t.repositories[repo(r)] === repo(c.image)) continue;
      t.repositories[repo(r)] = repo(c.image);
      const pinned = digestOnly ? ` (pinned by digest ${c.image.slice(c.image.indexOf('@') + 1)}; the target's is named by its tag)` : '';
      details.push(`image ${repo(c.image)} instead of ${repo(r)}${pinned}`);
      objects.add(`${w.kind}/${MANIFEST_NS}/${w.metadata.name}`);
    }
  }

  if (!details.length) return { transform: t };
  return {
    transform: t,
    finding: {
      id: 'calico-manifest-edits',
      severity: 'warning',
      title: `${details.length} edit(s) of the ${current.version} ${file} in the cluster`,
      objects: [...objects],
      details,
      action: 'transform',
      plan: `carried into the target ${file} (calico-node env, calico-config, image registry, container command/args/probe commands) as Calico's upgrade procedure asks; any other edit is replaced by the release's`,
    },
  };
}

function retaggedMirror(image: string, tag: string, version: string): RefusedError {
  return new RefusedError(
    `the image ${image} is a retagged ${tag} from another registry: the target's tag in that registry cannot be derived, and the release's own images may not be pullable there; no plan was made`,
    {
      hint: `put ${version}'s calico.yaml and the target's, both with the images your mirror serves, in <dir>/<X.Y.Z>/ and pass --manifests <dir>`,
    },
  );
}

/** The finding when the current release's calico.yaml could not be read: edits cannot be told from release defaults. */
export function manifestEditsUnknown(version: string | undefined, why: string): PlanFinding {
  return {
    id: 'calico-manifest-edits-unknown',
    severity: 'warning',
    title: `the current release's calico.yaml (${version ?? 'unknown version'}) could not be read: edits of the live calico.yaml objects cannot be found`,
    objects: [`DaemonSet/${MANIFEST_NS}/${DS}`, `ConfigMap/${MANIFEST_NS}/${CONFIG}`],
    details: [why],
    action: 'none',
    plan: 'the target calico.yaml is applied as released: put your edits into a copy of it and pass its folder with --manifests, or give a --manifests folder that also holds the current release',
  };
}

/** How many edits a transform carries (env set or removed, calico-config keys, registries, container fields). */
export function editCount(t: ManifestTransform | undefined): number {
  if (!t) return 0;
  return (
    t.calicoNodeEnv.set.length +
    t.calicoNodeEnv.remove.length +
    Object.keys(t.calicoConfig).length +
    Object.keys(t.repositories).length +
    (t.containerFields?.length ?? 0)
  );
}

/** The target's calico.yaml objects with the planned edits written in. */
export function applyManifestEdits(objs: KubeObject[], t: ManifestTransform | undefined): KubeObject[] {
  if (!t) return objs;
  return objs.map((o) => {
    const isDs = o.kind === 'DaemonSet' && o.metadata.name === DS;
    const isConfig = o.kind === 'ConfigMap' && o.metadata.name === CONFIG;
    const isWorkload = o.kind === 'DaemonSet' || o.kind === 'Deployment';
    if (!isDs && !isConfig && !isWorkload) return o;
    const out = structuredClone(o);
    if (isConfig) out.data = { ...out.data, ...t.calicoConfig };
    if (isWorkload) {
      for (const f of t.containerFields ?? []) {
        if (f.workload !== `${o.kind}/${o.metadata.name}`) continue;
        const c = containersOf(out).find((x) => x.name === f.container);
        if (c) setField(c, f.field, f.value);
      }
      for (const c of containersOf(out)) {
        const r = t.repositories[repo(c.image ?? '')];
        if (r) c.image = `${r}${c.image.slice(repo(c.image).length)}`;
      }
    }
    if (isDs) {
      const c = nodeContainer(out);
      if (c) {
        const env: any[] = (c.env ?? []).filter((e: any) => !t.calicoNodeEnv.remove.includes(e.name));
        for (const e of t.calicoNodeEnv.set) {
          const i = env.findIndex((x) => x.name === e.name);
          if (i >= 0) env[i] = e;
          else env.push(e);
        }
        c.env = env;
      }
    }
    return out;
  });
}

/**
 * Read the live calico.yaml objects and the current release's calico.yaml (from the --manifests source when it
 * holds that version, else the default source) and find the edits. An unreadable current release does not fail the
 * plan (the `calico-manifest-edits-unknown` finding instead); a mirror whose target images cannot be derived refuses it.
 */
export async function planManifestEdits(
  client: KubeClient,
  currentVersion: string | undefined,
  manifests: string | undefined,
  /** A calico-etcd.yaml install: its edits are found against the current release's calico-etcd.yaml. */
  opts: { etcd?: boolean } = {},
): Promise<{ transform?: ManifestTransform; finding?: PlanFinding }> {
  const need = opts.etcd ? 'etcd' : 'manifest';
  const file = opts.etcd ? 'calico-etcd.yaml' : 'calico.yaml';
  if (!currentVersion) {
    const ds = await client.getOrUndefined(K.daemonSet, MANIFEST_NS, DS);
    refusePinnedWithoutVersion(`DaemonSet ${MANIFEST_NS}/${DS}`, nodeContainer(ds)?.image, currentVersion);
    return { finding: manifestEditsUnknown(currentVersion, 'the current version is unknown') };
  }
  let current: Release;
  try {
    current = await loadRelease(currentVersion, { manifests, need });
  } catch (err) {
    if (!manifests) return { finding: manifestEditsUnknown(currentVersion, errorMessage(err)) };
    try {
      current = await loadRelease(currentVersion, { need });
    } catch (err2) {
      return { finding: manifestEditsUnknown(currentVersion, errorMessage(err2)) };
    }
  }
  const objects = (opts.etcd ? current.calicoEtcdManifest : current.calicoManifest) ?? [];
  const workloads: KubeObject[] = [];
  for (const o of objects) {
    if (o.kind !== 'DaemonSet' && o.kind !== 'Deployment') continue;
    const w = await client.getOrUndefined(o.kind === 'DaemonSet' ? K.daemonSet : K.deployment, MANIFEST_NS, o.metadata.name);
    if (w) workloads.push({ ...w, kind: o.kind });
  }
  const config = await client.getOrUndefined(K.configMap, MANIFEST_NS, CONFIG);
  return findManifestEdits(
    { ds: workloads.find((w) => w.kind === 'DaemonSet' && w.metadata.name === DS), config, workloads },
    { version: current.version, objects, file },
  );
}
