/**
 * The Calico releases cni-rewind ships (calico-releases/ in the package): gzipped upstream manifests and an index
 * of their checksums, operator images and CRD counts. Plans, schema checks and `doctor --target` for these
 * versions work offline; every read is checked against the index, so a damaged file is an error, not a plan.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { packageRoot } from '../core/package-root.js';
import { EnvironmentError } from '../core/errors.js';

export interface ShippedFile {
  sha256: string;
  bytes: number;
}
export interface ShippedRelease {
  /** `X.Y.Z` */
  version: string;
  files: Record<string, ShippedFile>;
  /** CRDs per file. */
  crds: Record<string, number>;
  operatorImage?: string;
  installTypes: ('operator' | 'manifest')[];
}

/** The folder holding the shipped releases; CNI_REWIND_RELEASES_DIR points elsewhere (tests of a damaged copy). */
export function shippedReleasesDir(): string {
  return process.env.CNI_REWIND_RELEASES_DIR ?? path.join(packageRoot(), 'calico-releases');
}

let index: ShippedRelease[] | undefined;
let indexDir: string | undefined;
/** Every shipped release, oldest first. */
export function shippedReleases(): ShippedRelease[] {
  const dir = shippedReleasesDir();
  if (index && indexDir === dir) return index;
  const file = path.join(dir, 'index.json');
  if (!existsSync(file))
    throw new EnvironmentError(`the shipped Calico releases are missing (${file}): the installation is incomplete`, { hint: 'reinstall cni-rewind' });
  const raw = JSON.parse(readFileSync(file, 'utf8')) as { releases: Record<string, Omit<ShippedRelease, 'version'>> };
  index = Object.entries(raw.releases).map(([version, r]) => ({ version, ...r }));
  indexDir = dir;
  return index;
}

export function shippedRelease(version: string): ShippedRelease | undefined {
  const bare = version.replace(/^v/, '');
  return shippedReleases().find((r) => r.version === bare);
}

/** A shipped file's text, checked against the index; undefined when that release has no such file. */
export function readShippedFile(version: string, name: string): { text: string; path: string; sha256: string; bytes: number } | undefined {
  const rel = shippedRelease(version);
  const meta = rel?.files[name];
  if (!rel || !meta) return undefined;
  const p = path.join(shippedReleasesDir(), rel.version, `${name}.gz`);
  let bytes: Buffer;
  try {
    bytes = gunzipSync(readFileSync(p));
  } catch (err) {
    throw new EnvironmentError(`the shipped Calico ${rel.version} ${name} cannot be read (${p}): ${(err as Error).message}`, { hint: 'reinstall cni-rewind' });
  }
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  if (sha256 !== meta.sha256 || bytes.length !== meta.bytes) {
    throw new EnvironmentError(
      `the shipped Calico ${rel.version} ${name} is damaged (${p}: sha256 ${sha256.slice(0, 12)}, expected ${meta.sha256.slice(0, 12)})`,
      { hint: 'reinstall cni-rewind' },
    );
  }
  return { text: bytes.toString('utf8'), path: p, sha256, bytes: bytes.length };
}
