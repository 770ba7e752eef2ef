/**
 * Where each object lives inside a bundle, and the rules every bundle path must follow. Paths are
 * relative, '/'-separated, free of `.`/`..` segments and of characters a file system or an archive could
 * interpret: a bundle read from an untrusted tar.gz must never write outside its root.
 */
import type { KubeObject } from '../kube/types.js';
import { groupOf } from '../kube/types.js';

export const MANIFEST_FILE = 'manifest.json';
export const DIRS = { crds: 'crds', resources: 'resources', v3: 'v3', config: 'config', nodes: 'nodes', etcd: 'etcd' } as const;

/** `etcd/ipam.jsonl`: the IPAM records of Calico's etcd datastore (an etcd-datastore bundle's v3 resources are in v3/). */
export const ETCD_IPAM_PATH = `${DIRS.etcd}/ipam.jsonl`;
export const CLUSTER_SCOPE_DIR = '_cluster';

/** Percent-encode anything outside a conservative set, so a name maps to exactly one safe file name. */
export function encodeSegment(s: string): string {
  const enc = s.replace(/[^A-Za-z0-9._-]/g, (c) => Array.from(Buffer.from(c, 'utf8'), (b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join(''));
  // '.' and '..' are valid Kubernetes names for no kind we export, but never let them become path segments.
  return enc === '.' || enc === '..' || enc === '' ? enc.replace(/\./g, '%2E') || '%00' : enc;
}

export function decodeSegment(s: string): string {
  return decodeURIComponent(s);
}

const nsDir = (ns: string | undefined) => (ns ? encodeSegment(ns) : CLUSTER_SCOPE_DIR);

/** `resources/<group>/<Kind>/<namespace|_cluster>/<name>.yaml` */
export function resourcePathFor(obj: KubeObject): string {
  return `${DIRS.resources}/${encodeSegment(groupOf(obj.apiVersion) || 'core')}/${encodeSegment(obj.kind)}/${nsDir(obj.metadata.namespace)}/${encodeSegment(obj.metadata.name)}.yaml`;
}

/**
 * Format 2: a kind with more objects than one list page holds is stored as one packed file, one JSON object per
 * line (`resources/<group>/<Kind>.jsonl`, `v3/<Kind>.jsonl`): one checksum for the kind instead of one per object.
 */
export const PACKED_EXT = '.jsonl';

/** `resources/<group>/<Kind>.jsonl` */
export function packedResourcePath(group: string, kind: string): string {
  return `${DIRS.resources}/${encodeSegment(group || 'core')}/${encodeSegment(kind)}${PACKED_EXT}`;
}

/** `v3/<Kind>.jsonl` */
export function packedV3Path(kind: string): string {
  return `${DIRS.v3}/${encodeSegment(kind)}${PACKED_EXT}`;
}

/** Is this bundle path a packed file (format 2)? */
export function isPackedPath(p: string): boolean {
  return p.endsWith(PACKED_EXT);
}

/** `v3/<Kind>/<namespace|_cluster>/<name>.yaml` (the projectcalico.org/v3 view) */
export function v3PathFor(obj: KubeObject): string {
  return `${DIRS.v3}/${encodeSegment(obj.kind)}/${nsDir(obj.metadata.namespace)}/${encodeSegment(obj.metadata.name)}.yaml`;
}

export function crdPathFor(crd: KubeObject): string {
  return `${DIRS.crds}/${encodeSegment(crd.metadata.name)}.yaml`;
}

/** `config/<namespace>/<Kind>/<name>.yaml` */
export function configPathFor(obj: KubeObject): string {
  return `${DIRS.config}/${nsDir(obj.metadata.namespace)}/${encodeSegment(obj.kind)}/${encodeSegment(obj.metadata.name)}.yaml`;
}

export function nodePathFor(name: string): string {
  return `${DIRS.nodes}/${encodeSegment(name)}.yaml`;
}

/** The parts of a `resources/...` object path, or undefined when the path is not one. */
export function parseResourcePath(p: string): { group: string; kind: string; namespace?: string; name: string } | undefined {
  const m = /^resources\/([^/]+)\/([^/]+)\/([^/]+)\/([^/]+)\.yaml$/.exec(p);
  if (!m) return undefined;
  const group = decodeSegment(m[1]!);
  return {
    group: group === 'core' ? '' : group,
    kind: decodeSegment(m[2]!),
    namespace: m[3] === CLUSTER_SCOPE_DIR ? undefined : decodeSegment(m[3]!),
    name: decodeSegment(m[4]!),
  };
}

/** The group and kind of a packed `resources/<group>/<Kind>.jsonl` path, or undefined when the path is not one. */
export function parsePackedResourcePath(p: string): { group: string; kind: string } | undefined {
  const m = /^resources\/([^/]+)\/([^/]+)\.jsonl$/.exec(p);
  if (!m) return undefined;
  const group = decodeSegment(m[1]!);
  return { group: group === 'core' ? '' : group, kind: decodeSegment(m[2]!) };
}

/** Why a relative bundle path is unsafe, or undefined when it is fine. */
export function unsafePathReason(p: string): string | undefined {
  if (!p) return 'empty path';
  if (p.length > 4096) return 'path too long';
  if (p.startsWith('/') || /^[A-Za-z]:/.test(p)) return 'absolute path';
  if (p.includes('\\')) return 'backslash in path';
  if (p.includes('\0')) return 'NUL in path';
  const segs = p.split('/');
  if (segs.some((s) => s === '..')) return "'..' in path";
  if (segs.some((s) => s === '' || s === '.')) return 'empty or "." path segment';
  return undefined;
}

/** Where the writer would have put this object, for the folder `rel` is in (undefined: not an object folder). */
function expectedPathFor(rel: string, obj: KubeObject): string | undefined {
  const top = rel.split('/')[0];
  if (isPackedPath(rel)) {
    if (top === DIRS.resources) return packedResourcePath(groupOf(obj.apiVersion), obj.kind);
    if (top === DIRS.v3) return packedV3Path(obj.kind);
    return undefined;
  }
  if (top === DIRS.resources) return resourcePathFor(obj);
  if (top === DIRS.v3) return v3PathFor(obj);
  if (top === DIRS.config) return configPathFor(obj);
  if (top === DIRS.crds) return obj.kind === 'CustomResourceDefinition' ? crdPathFor(obj) : `${DIRS.crds}/(not a CustomResourceDefinition)`;
  if (top === DIRS.nodes) return obj.kind === 'Node' ? nodePathFor(obj.metadata.name) : `${DIRS.nodes}/(not a Node)`;
  return undefined;
}

/**
 * Why an object read from `rel` does not belong there (its apiVersion group, kind, namespace or name say
 * another path), or undefined when it does. A bundle's paths are what restore and diff select by.
 */
export function objectPathMismatch(rel: string, obj: KubeObject): string | undefined {
  const want = expectedPathFor(rel, obj);
  if (want === undefined || want === rel) return undefined;
  const ns = obj.metadata.namespace ? `${obj.metadata.namespace}/` : '';
  return `${rel} holds ${obj.apiVersion} ${obj.kind} ${ns}${obj.metadata.name}, which belongs at ${want}`;
}
