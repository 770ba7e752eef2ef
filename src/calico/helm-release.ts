/**
 * The Helm release behind a Helm-installed tigera-operator (issue 31, item 2), read from Helm's own record of it:
 * Helm 3 and 4 keep every revision of a release as a Secret `sh.helm.release.v1.<release>.v<revision>` in the
 * release's namespace, labelled `owner=helm`, `name`, `status` and `version`, whose `release` key holds Helm's
 * encoding of the release (pkg/storage/driver/util.go encodeRelease: the release as JSON, gzipped, base64; the
 * Secret's own data encoding adds a second base64). With HELM_DRIVER=configmap the same record is a ConfigMap of
 * the same name and labels, its `release` key Helm's text as is. What comes out is only reported: chart, revision, status and
 * the top-level keys of the user-supplied values, never a value (they may hold credentials), and nothing read here
 * decides what cni-rewind does.
 */
import { gunzipSync } from 'node:zlib';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import { K } from '../kube/builtin.js';
import type { KubeObject } from '../kube/types.js';

/** A release decompresses to at most this much JSON; more is refused (a gzip bomb in a crafted Secret). */
export const HELM_RELEASE_MAX_BYTES = 16 * 1024 * 1024;
/** How many value keys are named at most; more are counted. */
const MAX_VALUE_KEYS = 50;
/** Helm's own rule for a release name (pkg/chart/common/util ValidateReleaseName), so it is safe in a label selector. */
const RELEASE_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** A namespace name (RFC 1123 label): an annotation that is none never becomes part of a request path. */
const NAMESPACE_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const GZIP_MAGIC = [0x1f, 0x8b, 0x08];

/**
 * Helm's record of one revision: a Secret (or ConfigMap) named `sh.helm.release.v1.<release>.v<revision>` (helm v4.3.2
 * pkg/storage/storage.go HelmStorageType, makeKey), a Secret of type `helm.sh/release.v1`, labelled `owner=helm`
 * (pkg/storage/driver/secrets.go newSecretsObject, cfgmaps.go newConfigMapsObject). Helm reads a record by that
 * name alone (Secrets.Get: `helm get --revision`, rollback's target) and lists the history by the label alone
 * (List/Query with `owner=helm`: history, status, upgrade, DeployedAll), so either mark makes an object Helm's.
 */
export const HELM_RECORD_PREFIX = 'sh.helm.release.v1.';
export const HELM_RECORD_SECRET_TYPE = 'helm.sh/release.v1';
export const HELM_OWNER_LABEL = 'owner';
export const HELM_OWNER_VALUE = 'helm';
/** The name Helm gives a record, with a release name as Helm allows it: the only way release and revision are read from one. */
const RECORD_NAME = /^sh\.helm\.release\.v1\.([a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*)\.v([1-9][0-9]{0,8})$/;

export interface HelmRelease {
  /** From the operator Deployment's `meta.helm.sh/release-name` and `-namespace` annotations. */
  release: string;
  namespace: string;
  /** The Secret (or, with Helm's ConfigMap storage, `ConfigMap/<name>`) the details below were read from. */
  record?: string;
  chart?: { name?: string; version?: string; appVersion?: string };
  revision?: number;
  /** Helm's status of that revision: deployed, or failed / pending-upgrade / ... when no revision is deployed. */
  status?: string;
  /** Top-level keys of the values the user supplied (`helm get values`), never their values. */
  valueKeys?: string[];
  /** Keys left out of valueKeys: beyond the first 50, or not a plain name. */
  otherValueKeys?: number;
  /** Why the record could not be read (forbidden, none found, undecodable): one line; the rest still works. */
  unreadable?: string;
}

/** A string from the record as it may be printed: no control characters (terminal escapes), at most `max` characters. */
function printable(v: unknown, max = 100): string | undefined {
  if (typeof v !== 'string') return undefined;
  const clean = v.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
  return clean.length > max ? `${clean.slice(0, max)}...` : clean;
}

/**
 * A record's `release` key to the release JSON: a Secret's as the API returns it (base64 of Helm's text), a
 * ConfigMap's as Helm wrote it. Throws a one-line Error on anything that is not Helm's encoding or that would
 * decompress beyond HELM_RELEASE_MAX_BYTES.
 */
export function decodeHelmReleaseData(data: string, storage: 'secret' | 'configmap' = 'secret'): unknown {
  if (data.length > HELM_RELEASE_MAX_BYTES) throw new Error(`the record is larger than ${HELM_RELEASE_MAX_BYTES} bytes`);
  const helmText = storage === 'secret' ? Buffer.from(data, 'base64').toString('latin1') : data;
  let bytes = Buffer.from(helmText, 'base64');
  // Releases stored before Helm compressed them are plain JSON under the base64 (as Helm's decodeRelease allows).
  if (bytes.length > 3 && GZIP_MAGIC.every((b, i) => bytes[i] === b)) {
    try {
      bytes = gunzipSync(bytes, { maxOutputLength: HELM_RELEASE_MAX_BYTES });
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code === 'ERR_BUFFER_TOO_LARGE') throw new Error(`the record decompresses to more than ${HELM_RELEASE_MAX_BYTES} bytes`, { cause: err });
      throw new Error(`the record is not valid gzip (${(err as Error).message})`, { cause: err });
    }
  }
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    throw new Error('the record is not Helm release JSON', { cause: err });
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** What the release JSON tells, each field only when it has the type Helm writes. */
export function summarizeHelmRelease(rel: unknown): Pick<HelmRelease, 'chart' | 'revision' | 'status' | 'valueKeys' | 'otherValueKeys'> {
  if (!isObject(rel)) throw new Error('the record is not Helm release JSON');
  const meta = isObject(rel.chart) && isObject(rel.chart.metadata) ? rel.chart.metadata : {};
  const chart = Object.fromEntries(
    (['name', 'version', 'appVersion'] as const).map((k) => [k, printable(meta[k])]).filter(([, v]) => v !== undefined),
  ) as HelmRelease['chart'];
  const status = isObject(rel.info) ? printable(rel.info.status, 40) : undefined;
  const revision = typeof rel.version === 'number' && Number.isSafeInteger(rel.version) ? rel.version : undefined;
  const keys = isObject(rel.config) ? Object.keys(rel.config) : [];
  const named = keys.filter((k) => /^[A-Za-z0-9_.-]{1,63}$/.test(k)).slice(0, MAX_VALUE_KEYS);
  return {
    ...(Object.keys(chart!).length ? { chart } : {}),
    ...(revision !== undefined ? { revision } : {}),
    ...(status ? { status } : {}),
    valueKeys: named,
    ...(keys.length > named.length ? { otherValueKeys: keys.length - named.length } : {}),
  };
}

function revisionOf(s: KubeObject): number {
  const v = Number(s.metadata.labels?.version);
  return Number.isSafeInteger(v) ? v : -1;
}

/** The newest of the records. */
function newest(records: KubeObject[]): KubeObject | undefined {
  return records.reduce<KubeObject | undefined>((best, s) => (!best || revisionOf(s) > revisionOf(best) ? s : best), undefined);
}

/**
 * The release's deployed revision (the newest one if none is deployed), read from Helm's Secrets in the release's
 * namespace. A record that cannot be read leaves `unreadable` set and the rest of the answer as the annotations had it.
 */
export async function readHelmRelease(client: KubeClient, release: string, namespace: string): Promise<HelmRelease> {
  const base = { release, namespace };
  if (!RELEASE_NAME.test(release) || release.length > 53) return { ...base, unreadable: `'${printable(release, 60)}' is not a Helm release name` };
  if (!NAMESPACE_NAME.test(namespace)) return { ...base, unreadable: `'${printable(namespace, 70)}' is not a namespace name` };
  const selector = `owner=helm,name=${release}`;
  let record: KubeObject | undefined;
  let storage: 'secret' | 'configmap' = 'secret';
  for (const [kind, type] of [
    ['secret', K.secret],
    ['configmap', K.configMap],
  ] as const) {
    try {
      // Helm keeps one revision deployed; the history (up to --history-max) is read only when none is.
      const deployed = await client.listAll(type, { namespace, labelSelector: `${selector},status=deployed` });
      record = newest(deployed) ?? newest(await client.listAll(type, { namespace, labelSelector: selector }));
    } catch (err) {
      if (err instanceof KubeApiError && err.statusCode === 403) {
        return {
          ...base,
          unreadable: `listing ${type.plural === 'secrets' ? 'Secrets' : 'ConfigMaps'} in ${namespace} (Helm's release records) is forbidden${err.user ? ` for ${err.user}` : ''}`,
        };
      }
      throw err;
    }
    storage = kind;
    if (record) break;
  }
  if (!record) return { ...base, unreadable: `no Helm release record (Secret or ConfigMap labelled ${selector}) in ${namespace}` };
  const data = record.data?.release;
  const name = storage === 'secret' ? record.metadata.name : `ConfigMap/${record.metadata.name}`;
  const where = `${storage === 'secret' ? 'Secret' : 'ConfigMap'} ${namespace}/${record.metadata.name}`;
  if (typeof data !== 'string') return { ...base, record: name, unreadable: `${where} has no release data` };
  try {
    return { ...base, record: name, ...summarizeHelmRelease(decodeHelmReleaseData(data, storage)) };
  } catch (err) {
    return { ...base, record: name, unreadable: `${where}: ${(err as Error).message}` };
  }
}

/**
 * Is this object Helm's record of a release revision? 'record': a Secret or ConfigMap with Helm's name for a record
 * and one of its other marks (a Secret's type `helm.sh/release.v1`, or the label `owner=helm`), as every record
 * Helm writes has. 'partial': a Secret or ConfigMap with some of Helm's marks but not that pair, which Helm would
 * still read (by the name or by the label) but which no Helm wrote: neither Helm's to keep nor anyone's to write.
 * Deciding by the name as well means a label or a type alone never makes another object count as Helm's.
 */
export function helmRecordMarks(o: KubeObject): 'record' | 'partial' | undefined {
  if (o.kind !== 'Secret' && o.kind !== 'ConfigMap') return undefined;
  const named = typeof o.metadata?.name === 'string' && o.metadata.name.startsWith(HELM_RECORD_PREFIX);
  const typed = o.kind === 'Secret' && o.type === HELM_RECORD_SECRET_TYPE;
  const labelled = o.metadata?.labels?.[HELM_OWNER_LABEL] === HELM_OWNER_VALUE;
  if (named && (typed || labelled)) return 'record';
  return named || typed || labelled ? 'partial' : undefined;
}

/** Release and revision from a record's name, when it is one Helm would give (release names as Helm allows them). */
export function helmRecordName(name: string): { release: string; revision: number } | undefined {
  // Helm's longest: the prefix, a 53-character release name, `.v` and a revision; the bound keeps the match linear.
  const m = name.length <= 90 ? RECORD_NAME.exec(name) : null;
  return m && m[1]!.length <= 53 ? { release: m[1]!, revision: Number(m[2]) } : undefined;
}
