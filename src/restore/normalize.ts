/**
 * Turning a bundle object into what restore writes, and comparing it with what the cluster holds.
 * Server-owned fields and runtime status are removed by the shared stripServerFields (src/kube/normalize.ts).
 */
import { createHmac, randomBytes } from 'node:crypto';
import yaml from 'js-yaml';
import { createTwoFilesPatch } from 'diff';
import type { KubeObject } from '../kube/types.js';
import { stripServerFields as stripShared, type StripOptions } from '../kube/normalize.js';
import { canonicalJson, sortKeys } from '../util/canonical.js';
/** Annotations that describe a previous write, not desired state. */
const VOLATILE_ANNOTATIONS = ['kubectl.kubernetes.io/last-applied-configuration'];

export function stripServerFields(obj: KubeObject, opts: StripOptions = {}): KubeObject {
  const copy = stripShared(obj, opts);
  for (const a of VOLATILE_ANNOTATIONS) delete copy.metadata.annotations?.[a];
  if (copy.metadata.annotations && Object.keys(copy.metadata.annotations).length === 0) delete copy.metadata.annotations;
  if (copy.metadata.labels && Object.keys(copy.metadata.labels).length === 0) delete copy.metadata.labels;
  return copy;
}

/**
 * The part of an object restore is responsible for: everything but server fields and status, with
 * ownerReferences compared by owner identity (kind/name), since owner UIDs change on a re-create.
 */
export function comparable(obj: KubeObject): KubeObject {
  const c = stripServerFields(obj, { v3MetadataServerFields: true });
  if (c.metadata.ownerReferences) c.metadata.ownerReferences = c.metadata.ownerReferences.map((o) => ({ ...o, uid: '' }));
  if (c.metadata.finalizers?.length === 0) delete c.metadata.finalizers;
  return c;
}

export function sameContent(a: KubeObject, b: KubeObject): boolean {
  return canonicalJson(comparable(a)) === canonicalJson(comparable(b));
}

/** A unified diff live -> desired of the parts restore writes. */
export function objectDiff(live: KubeObject, desired: KubeObject, label: string): string {
  const dump = (o: KubeObject) => yaml.dump(sortKeys(maskSecretValues(comparable(o))), { noRefs: true, lineWidth: 200 });
  return createTwoFilesPatch(`${label} (cluster)`, `${label} (bundle)`, dump(live), dump(desired), undefined, undefined, { context: 2 })
    .split('\n')
    .filter((l) => !l.startsWith('====='))
    .join('\n')
    .trimEnd();
}

/**
 * Paths where `actual` does not hold what `wanted` says (fields the server added, like defaults, are fine):
 * the drift check after writing.
 */
export function missingFrom(wanted: unknown, actual: unknown, path = ''): string[] {
  if (wanted && typeof wanted === 'object' && !Array.isArray(wanted)) {
    if (!actual || typeof actual !== 'object' || Array.isArray(actual)) return [path || '.'];
    const out: string[] = [];
    for (const [k, v] of Object.entries(wanted)) out.push(...missingFrom(v, (actual as Record<string, unknown>)[k], path ? `${path}.${k}` : k));
    return out;
  }
  if (Array.isArray(wanted)) {
    if (!Array.isArray(actual) || actual.length !== wanted.length) return [path];
    return wanted.flatMap((w, i) => missingFrom(w, actual[i], `${path}[${i}]`));
  }
  return canonicalJson(wanted) === canonicalJson(actual) ? [] : [path];
}

/** Per-process key: fingerprints of Secret values compare within one run but reveal nothing about the values. */
const FINGERPRINT_KEY = randomBytes(32);

/**
 * A diff is printed and returned in -o json: Secret values in it become fingerprints, so a changed value still
 * shows as a changed line without the value itself ever being output.
 */
function maskSecretValues(o: KubeObject): KubeObject {
  if (o.kind !== 'Secret' || o.apiVersion !== 'v1') return o;
  const out: any = { ...o };
  for (const field of ['data', 'stringData']) {
    const m = out[field] as Record<string, unknown> | undefined;
    if (m && typeof m === 'object')
      out[field] = Object.fromEntries(
        Object.entries(m).map(([k, v]) => [
          k,
          `<secret value, fingerprint ${createHmac('sha256', FINGERPRINT_KEY).update(String(v)).digest('hex').slice(0, 12)}>`,
        ]),
      );
  }
  return out as KubeObject;
}
