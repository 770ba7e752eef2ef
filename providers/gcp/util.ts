/** GCE naming, labels, disk references and error mapping for the GCP provider (providers/gcp/index.ts). */
import { randomBytes } from 'node:crypto';
import { EnvironmentError, errorMessage, FLAT_TAG_KEYS, isErrorKind } from '../../src/provider-kit/index.js';

/** Shared tag keys mapped to GCE label syntax, plus the keys this provider adds. */
export const GCP_LABELS = FLAT_TAG_KEYS;

/** A value as a GCE label value: lowercase, [a-z0-9_-], at most 63 characters. */
export function labelValue(v: string): string {
  return v
    .toLowerCase()
    .replace(/[^a-z0-9_-]/g, '_')
    .slice(0, 63);
}

/** A GCE resource name: [a-z]([-a-z0-9]*[a-z0-9])?, at most 63 characters. */
export function resourceName(...parts: string[]): string {
  const s = parts
    .join('-')
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/-+/g, '-');
  const suffix = randomBytes(3).toString('hex');
  const head = s
    .replace(/^[^a-z]+/, '')
    .slice(0, 63 - suffix.length - 1)
    .replace(/-+$/, '');
  return `${head || 'cnr'}-${suffix}`;
}

export const lastPath = (u: string | null | undefined) =>
  String(u ?? '')
    .split('/')
    .pop() ?? '';

/** GCE PD CSI writes the PV it made a disk for into the disk description as JSON; keys as tags. */
export function descriptionTags(description: string | null | undefined): Record<string, string> {
  try {
    const v = JSON.parse(description ?? '');
    return v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).filter((e): e is [string, string] => typeof e[1] === 'string'))
      : {};
  } catch {
    return {};
  }
}

/** gax errors carry `code` (HTTP status over REST); throttling and unavailability are retried. */
export function isRetryableGcpError(err: unknown): { retry: boolean } {
  const code = Number((err as { code?: unknown })?.code);
  return { retry: code === 429 || code === 503 || code === 8 /* RESOURCE_EXHAUSTED */ || code === 14 /* UNAVAILABLE */ };
}

export function isNotFound(err: unknown): boolean {
  const e = (err as { cause?: unknown })?.cause ?? err;
  const code = Number((e as { code?: unknown })?.code);
  return code === 404 || code === 5;
}

export function describeGcpError(op: string, err: unknown): Error {
  if (isErrorKind(err, 'environment') || isErrorKind(err, 'bad-input')) return err;
  const e = err as { code?: unknown; message?: string };
  const code = Number(e?.code);
  const msg = errorMessage(err).split('\n')[0];
  if (/Could not load the default credentials|Unable to detect a Project Id|invalid_grant|Could not refresh access token/i.test(msg)) {
    return new EnvironmentError(`GCP ${op}: no usable Application Default Credentials (${msg})`, {
      hint: 'run `gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS',
      cause: err,
    });
  }
  if (code === 401 || code === 403 || code === 7 || code === 16)
    return new EnvironmentError(`GCP ${op}: permission denied: ${msg}`, { hint: 'see examples/gcp-roles.md for the permissions cni-rewind needs', cause: err });
  if (/ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ETIMEDOUT/.test(msg))
    return new EnvironmentError(`GCP ${op}: cannot reach the Compute API (${msg})`, { cause: err });
  return new EnvironmentError(`GCP ${op} failed${Number.isFinite(code) ? ` (${code})` : ''}: ${msg}`, { cause: err });
}

/** Where a disk lives, from its URL or path: `projects/P/zones/Z/disks/D` or `projects/P/regions/R/disks/D` (regional PD). */
export function diskRef(source: string | null | undefined): { project?: string; zone?: string; region?: string; disk: string } {
  const m = /projects\/([^/]+)\/(zones|regions)\/([^/]+)\/disks\/([^/]+)$/.exec(String(source ?? ''));
  if (!m) return { disk: lastPath(source) };
  return { project: m[1], ...(m[2] === 'zones' ? { zone: m[3] } : { region: m[3] }), disk: m[4]! };
}
