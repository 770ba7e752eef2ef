/**
 * What a CRD's structural schema would do to an object: which fields the API server would prune (unknown
 * fields are silently dropped on write, or refused under fieldValidation=Strict) and which values it would
 * reject (wrong type, enum, pattern, limits, missing required fields). Used by restore (before writing a
 * bundle object into a cluster whose CRDs may be older), plan and doctor.
 *
 * This follows the Kubernetes rules for structural schemas (apiextensions-apiserver pruning + validation)
 * for the keywords Calico's CRDs use; it is a preview, the API server stays the authority.
 */
import type { KubeObject } from '../kube/types.js';

export interface SchemaFinding {
  /** JSONPath-like location, e.g. `spec.calicoNetwork.ipPools[0].name`. */
  path: string;
  kind: 'pruned' | 'rejected';
  detail: string;
}

type Schema = Record<string, any>;

/** Fields every object has, which the API server handles itself (never pruned by the CRD schema). */
const ROOT_MANAGED = new Set(['apiVersion', 'kind', 'metadata']);

/** The openAPIV3Schema that applies to an object's apiVersion, or undefined (no such version / no schema). */
export function schemaFor(obj: Pick<KubeObject, 'apiVersion'>, crd: KubeObject): Schema | undefined {
  const version = obj.apiVersion.includes('/') ? obj.apiVersion.split('/')[1] : obj.apiVersion;
  const v = (crd.spec?.versions ?? []).find((x: any) => x.name === version);
  return v?.schema?.openAPIV3Schema ?? crd.spec?.validation?.openAPIV3Schema;
}

/** Which fields `crd` would prune from `obj` and which values it would reject. */
export function checkAgainstSchema(obj: KubeObject, crd: KubeObject): SchemaFinding[] {
  const findings: SchemaFinding[] = [];
  const group = obj.apiVersion.split('/')[0];
  if (group !== crd.spec?.group || obj.kind !== crd.spec?.names?.kind) {
    findings.push({ path: '', kind: 'rejected', detail: `${obj.apiVersion} ${obj.kind} is not defined by CRD ${crd.metadata?.name}` });
    return findings;
  }
  const schema = schemaFor(obj, crd);
  if (!schema) {
    const served = (crd.spec?.versions ?? []).map((v: any) => v.name).join(', ');
    findings.push({
      path: 'apiVersion',
      kind: 'rejected',
      detail: `CRD ${crd.metadata?.name} does not serve ${obj.apiVersion} (serves ${served || 'nothing'})`,
    });
    return findings;
  }
  walk(obj, schema, '', findings, true);
  return findings;
}

/** A copy of `obj` without the fields `crd` would prune (what the server would store). */
export function pruneUnknownFields<T extends KubeObject>(obj: T, crd: KubeObject): T {
  const copy = structuredClone(obj);
  const schema = schemaFor(obj, crd);
  if (!schema) return copy;
  prune(copy, schema, true);
  return copy;
}

/**
 * A copy without the empty maps (`nodeSelector: {}`): fields whose schema is a map (additionalProperties, no
 * properties) holding no key. For the Go types behind Calico's CRDs an empty map and an absent one are the same
 * value (`omitempty` drops both), while a chart or an operator writes one or the other: the 3.32 tigera-operator
 * chart renders `controlPlaneNodeSelector: {}` into the Installation, 3.31's renders nothing. Empty structs and
 * lists are kept: for those, set-but-empty can mean something (an Installation's `ipPools: []`).
 */
export function withoutEmptyMaps<T extends KubeObject>(obj: T, crd: KubeObject): T {
  const copy = structuredClone(obj);
  const schema = schemaFor(obj, crd);
  if (schema) dropEmptyMaps(copy, schema);
  return copy;
}

function dropEmptyMaps(v: unknown, s: Schema): void {
  if (isPlainObject(v)) {
    for (const key of Object.keys(v)) {
      const cs = childSchema(s, key);
      if (!cs || cs === 'any') continue;
      const child = v[key];
      if (isPlainObject(child) && Object.keys(child).length === 0 && !cs.properties && cs.additionalProperties) delete v[key];
      else dropEmptyMaps(child, cs);
    }
  } else if (Array.isArray(v) && s.items && typeof s.items === 'object') {
    for (const item of v) dropEmptyMaps(item, s.items);
  }
}

/**
 * A copy with the CRD's structural defaults filled where a field is absent and its parent object present, as the API
 * server fills them on every read and write (Kubernetes "Defaulting" for CRDs). Calico 3.32's CRDs declare some
 * (KubeControllersConfiguration `healthChecks: Enabled`, `loadBalancer.assignIPs: AllServices`), so an object stored
 * under an older CRD reads back with them.
 */
export function withSchemaDefaults<T extends KubeObject>(obj: T, crd: KubeObject): T {
  const copy = structuredClone(obj);
  const schema = schemaFor(obj, crd);
  if (schema) fillDefaults(copy, schema);
  return copy;
}

function fillDefaults(v: unknown, s: Schema): void {
  if (isPlainObject(v)) {
    for (const [key, cs] of Object.entries<Schema>(s.properties ?? {}))
      if (v[key] === undefined && cs && typeof cs === 'object' && cs.default !== undefined) v[key] = structuredClone(cs.default);
    for (const key of Object.keys(v)) {
      const cs = childSchema(s, key);
      if (cs && cs !== 'any') fillDefaults(v[key], cs);
    }
  } else if (Array.isArray(v) && s.items && typeof s.items === 'object') {
    for (const item of v) fillDefaults(item, s.items);
  }
}

// ---------- walking ----------

function join(path: string, key: string): string {
  return path ? `${path}.${key}` : key;
}

function preservesUnknown(s: Schema): boolean {
  return s['x-kubernetes-preserve-unknown-fields'] === true;
}

/** The schema a child key of an object node must follow: undefined = the key is unknown (pruned). */
function childSchema(s: Schema, key: string): Schema | 'any' | undefined {
  if (s.properties && key in s.properties) return s.properties[key];
  if (s.additionalProperties && typeof s.additionalProperties === 'object') return s.additionalProperties;
  if (s.additionalProperties === true) return 'any';
  if (preservesUnknown(s)) return 'any';
  return undefined;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function typeOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

function typeMatches(s: Schema, v: unknown): boolean {
  if (s['x-kubernetes-int-or-string']) return typeof v === 'string' || (typeof v === 'number' && Number.isInteger(v));
  const want = s.type as string | undefined;
  if (!want) return true;
  const got = typeOf(v);
  if (want === 'number') return got === 'number' || got === 'integer';
  if (want === 'object') return got === 'object';
  return want === got;
}

function walk(v: unknown, s: Schema, path: string, out: SchemaFinding[], root = false): void {
  if (v === null) {
    // Non-nullable nulls are dropped by the server before validation.
    if (!s.nullable) out.push({ path, kind: 'pruned', detail: 'null value for a field that is not nullable' });
    return;
  }
  if (!typeMatches(s, v)) {
    const want = s['x-kubernetes-int-or-string'] ? 'integer or string' : s.type;
    out.push({ path, kind: 'rejected', detail: `is ${typeOf(v)}, the schema wants ${want}` });
    return;
  }
  checkValueRules(v, s, path, out);
  if (isPlainObject(v)) {
    const embedded = root || s['x-kubernetes-embedded-resource'] === true;
    for (const [key, child] of Object.entries(v)) {
      const p = join(path, key);
      if (embedded && ROOT_MANAGED.has(key)) continue;
      const cs = childSchema(s, key);
      if (cs === undefined) {
        out.push({ path: p, kind: 'pruned', detail: 'field not in the CRD schema' });
        continue;
      }
      if (cs !== 'any') walk(child, cs, p, out);
    }
    for (const req of (s.required ?? []) as string[]) {
      if (!(req in v) || v[req] === null) out.push({ path: join(path, req), kind: 'rejected', detail: 'required field is missing' });
    }
    const n = Object.keys(v).length;
    if (s.maxProperties !== undefined && n > s.maxProperties)
      out.push({ path, kind: 'rejected', detail: `has ${n} properties, at most ${s.maxProperties} allowed` });
  } else if (Array.isArray(v)) {
    if (s.maxItems !== undefined && v.length > s.maxItems) out.push({ path, kind: 'rejected', detail: `has ${v.length} items, at most ${s.maxItems} allowed` });
    if (s.minItems !== undefined && v.length < s.minItems)
      out.push({ path, kind: 'rejected', detail: `has ${v.length} items, at least ${s.minItems} required` });
    if (s.items && typeof s.items === 'object') v.forEach((item, i) => walk(item, s.items, `${path}[${i}]`, out));
  }
}

function checkValueRules(v: unknown, s: Schema, path: string, out: SchemaFinding[]): void {
  if (Array.isArray(s.enum) && !s.enum.some((e: unknown) => JSON.stringify(e) === JSON.stringify(v))) {
    out.push({ path, kind: 'rejected', detail: `${JSON.stringify(v)} is not one of ${s.enum.map((e: unknown) => JSON.stringify(e)).join(', ')}` });
  }
  if (typeof v === 'string') {
    if (s.pattern) {
      let re: RegExp | undefined;
      try {
        re = new RegExp(s.pattern, 'u');
      } catch {
        re = undefined; // a Go RE2 pattern JavaScript cannot compile: leave it to the server
      }
      if (re && !re.test(v)) out.push({ path, kind: 'rejected', detail: `${JSON.stringify(v)} does not match ${s.pattern}` });
    }
    const len = [...v].length;
    if (s.maxLength !== undefined && len > s.maxLength)
      out.push({ path, kind: 'rejected', detail: `is ${len} characters long, at most ${s.maxLength} allowed` });
    if (s.minLength !== undefined && len < s.minLength)
      out.push({ path, kind: 'rejected', detail: `is ${len} characters long, at least ${s.minLength} required` });
  }
  if (typeof v === 'number') {
    if (s.maximum !== undefined && (s.exclusiveMaximum ? v >= s.maximum : v > s.maximum))
      out.push({ path, kind: 'rejected', detail: `${v} is above the maximum ${s.maximum}` });
    if (s.minimum !== undefined && (s.exclusiveMinimum ? v <= s.minimum : v < s.minimum))
      out.push({ path, kind: 'rejected', detail: `${v} is below the minimum ${s.minimum}` });
  }
}

function prune(v: unknown, s: Schema, root = false): void {
  if (isPlainObject(v)) {
    const embedded = root || s['x-kubernetes-embedded-resource'] === true;
    for (const key of Object.keys(v)) {
      if (embedded && ROOT_MANAGED.has(key)) continue;
      const cs = childSchema(s, key);
      if (cs === undefined || (v[key] === null && cs !== 'any' && !cs.nullable)) {
        delete v[key];
        continue;
      }
      if (cs !== 'any') prune(v[key], cs);
    }
  } else if (Array.isArray(v) && s.items && typeof s.items === 'object') {
    for (const item of v) prune(item, s.items);
  }
}
