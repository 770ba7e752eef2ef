/**
 * Bundles in object storage: `s3://bucket/prefix[/name]`. A bundle is stored as ONE object, its `.tar.gz` archive,
 * uploaded with a streamed multipart upload that S3 makes visible only when it completes: a reader never sees a
 * half-written bundle, and an upload killed half-way leaves no object (only an incomplete multipart upload, which
 * list ignores and prune or a bucket lifecycle rule aborts). The SHA-256 of the archive is sent as the object's checksum
 * (checked by S3 on upload, by the SDK on download); the bundle's own per-file checksums are checked on open.
 *
 * Credentials and endpoint come from the standard AWS chain (AWS_PROFILE, AWS_ACCESS_KEY_ID, IRSA's web identity,
 * instance roles, ...), AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL for S3-compatible stores (then path-style addressing).
 * HTTPS_PROXY (https:// endpoints, AWS itself), HTTP_PROXY (http:// endpoints), ALL_PROXY and NO_PROXY are honoured.
 * CNI_REWIND_S3_SSE (AES256 or aws:kms) and CNI_REWIND_S3_SSE_KMS_KEY_ID ask for server-side encryption.
 * The SDK is imported only when an s3:// location is used.
 */
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, rmSync } from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { Readable } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';
import { BadInputError, EnvironmentError, errorMessage, isErrorKind } from '../core/errors.js';
import { makeTempDir } from '../util/temp-dir.js';
import type { BundleManifest } from './types.js';

export const isRemote = (p: string | undefined): p is string => !!p && /^s3:\/\//i.test(p);

export interface S3Location {
  bucket: string;
  /** Key or key prefix, without leading or trailing slashes. */
  key: string;
}

export function parseS3Url(u: string): S3Location {
  const m = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:\/(.*))?$/i.exec(u.trim());
  if (!m) throw new BadInputError(`"${u}" is not an s3:// location`, { hint: 'use s3://BUCKET/PREFIX or s3://BUCKET/PREFIX/NAME' });
  return { bucket: m[1]!, key: (m[2] ?? '').replace(/^\/+|\/+$/g, '') };
}

const ARCHIVE = '.tar.gz';

/** The object key a bundle written to `out` gets: `out` itself when it names a .tar.gz, else `<out>/<bundle id>.tar.gz`. */
export function objectKeyFor(loc: S3Location, bundleId: string): string {
  if (loc.key.endsWith(ARCHIVE)) return loc.key;
  return [loc.key, `${bundleId}${ARCHIVE}`].filter(Boolean).join('/');
}

let clientPromise: Promise<S3Client> | undefined;
async function s3(): Promise<S3Client> {
  // The pinned SDK supports Node 20 (which this tool supports); its notice about future SDK releases is noise here.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  clientPromise ??= Promise.all([import('@aws-sdk/client-s3'), import('../provider-kit/proxy.js')]).then(([{ S3Client }, { envProxyAgent }]) => {
    const custom = !!(process.env.AWS_ENDPOINT_URL_S3 || process.env.AWS_ENDPOINT_URL);
    // The SDK ignores HTTPS_PROXY/HTTP_PROXY/NO_PROXY; this agent applies them per request, as for the providers.
    const agent = envProxyAgent();
    return new S3Client({
      region: process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1',
      forcePathStyle: custom || process.env.CNI_REWIND_S3_PATH_STYLE === 'true',
      ...(agent ? { requestHandler: { httpAgent: agent, httpsAgent: agent } } : {}),
    });
  });
  return clientPromise;
}

function storageError(what: string, err: unknown): EnvironmentError {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  const status = e.$metadata?.httpStatusCode;
  return new EnvironmentError(
    `${what}: ${e.name && e.name !== 'Error' ? `${e.name}: ` : ''}${errorMessage(err).split('\n')[0]}${status ? ` (HTTP ${status})` : ''}`,
    {
      cause: err,
      hint: 'check the AWS credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID, the workload identity) and AWS_ENDPOINT_URL_S3 for S3-compatible stores',
    },
  );
}

/** Upload a local bundle archive as one object; metadata lets `list` show it without downloading it. */
export async function uploadBundle(archive: string, target: string, manifest: BundleManifest, sha256: string): Promise<string> {
  const loc = parseS3Url(target);
  const key = objectKeyFor(loc, manifest.id);
  const { Upload } = await import('@aws-sdk/lib-storage');
  const sse = process.env.CNI_REWIND_S3_SSE as 'AES256' | 'aws:kms' | undefined;
  const upload = new Upload({
    client: await s3(),
    params: {
      Bucket: loc.bucket,
      Key: key,
      Body: createReadStream(archive),
      ContentType: 'application/gzip',
      ChecksumAlgorithm: 'SHA256',
      ServerSideEncryption: sse,
      SSEKMSKeyId: sse === 'aws:kms' ? process.env.CNI_REWIND_S3_SSE_KMS_KEY_ID : undefined,
      Metadata: {
        'bundle-id': manifest.id,
        'created-at': manifest.createdAt,
        cluster: manifest.cluster.name ?? '',
        'cluster-uid': manifest.cluster.uid,
        calico: manifest.calico?.version ?? '',
        complete: String(manifest.complete !== false),
        objects: String((manifest.resources ?? []).reduce((s, r) => s + (r.count ?? 0), 0)),
        snapshots: String(manifest.snapshots.length),
        sha256,
      },
    },
  });
  try {
    await upload.done();
  } catch (err) {
    throw storageError(`cannot upload the bundle to s3://${loc.bucket}/${key}`, err);
  }
  return `s3://${loc.bucket}/${key}`;
}

const downloads: string[] = [];
process.once('exit', () => {
  for (const d of downloads) rmSync(d, { recursive: true, force: true });
});

/**
 * Download the bundle at an s3:// URL to a private temporary file (removed when the process exits) and return its
 * path. `s3://b/p/<id>` finds `<id>.tar.gz`. The SDK checks the object's SHA-256 against what was uploaded.
 */
export async function fetchBundle(url: string): Promise<string> {
  const loc = parseS3Url(url);
  if (!loc.key) throw new BadInputError(`${url} names a bucket, not a bundle`, { hint: `see: cni-rewind list ${url}` });
  const client = await s3();
  const { GetObjectCommand } = await import('@aws-sdk/client-s3');
  const keys = loc.key.endsWith(ARCHIVE) ? [loc.key] : [`${loc.key}${ARCHIVE}`, loc.key];
  const dir = makeTempDir('cni-rewind-s3-');
  downloads.push(dir);
  for (const key of keys) {
    let body: Readable;
    try {
      const res = await client.send(new GetObjectCommand({ Bucket: loc.bucket, Key: key, ChecksumMode: 'ENABLED' }));
      body = res.Body as Readable;
    } catch (err) {
      if ((err as { name?: string }).name === 'NoSuchKey') continue;
      throw storageError(`cannot read s3://${loc.bucket}/${key}`, err);
    }
    const file = path.join(dir, path.basename(key).endsWith(ARCHIVE) ? path.basename(key) : `bundle${ARCHIVE}`);
    const shown = `s3://${loc.bucket}/${key}`;
    try {
      await pipeline(body, checkedDownload(shown), createWriteStream(file, { mode: 0o600 }));
    } catch (err) {
      if (isErrorKind(err, 'bad-input')) throw err;
      throw storageError(`cannot download ${shown}`, err);
    }
    return file;
  }
  throw new BadInputError(`${url}: no such bundle (no object ${keys.map((k) => `s3://${loc.bucket}/${k}`).join(' or ')})`, {
    hint: `see: cni-rewind list s3://${loc.bucket}/${path.posix.dirname(loc.key)}`,
  });
}

/** The most an s3:// bundle may hold: what extracting an archive accepts unpacked (archive.ts). */
export const MAX_REMOTE_BUNDLE_BYTES = 8 * 1024 * 1024 * 1024;

/**
 * Check a download as it streams, naming the URL: anything that does not start as gzip stops after its first
 * bytes (it was downloaded whole before, then refused naming the temporary file), and so does one past the limit.
 */
function checkedDownload(shown: string) {
  return async function* (source: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
    let head = Buffer.alloc(0);
    let total = 0;
    for await (const chunk of source) {
      if (head.length < 2) {
        head = Buffer.concat([head, chunk]).subarray(0, 2);
        if (head.length === 2 && (head[0] !== 0x1f || head[1] !== 0x8b))
          throw new BadInputError(`${shown} is not a bundle (not a gzip-compressed tar archive)`);
      }
      total += chunk.length;
      if (total > MAX_REMOTE_BUNDLE_BYTES) throw new BadInputError(`${shown} is larger than ${MAX_REMOTE_BUNDLE_BYTES} bytes; not read`);
      yield chunk;
    }
    if (head.length < 2) throw new BadInputError(`${shown} is not a bundle (not a gzip-compressed tar archive)`);
  };
}

export interface RemoteListed {
  path: string;
  id: string;
  /** What the manifest (or the object's metadata) claims: shown, never used to decide anything. */
  createdAt: string;
  /** When the storage itself recorded the bundle (S3 LastModified, the manifest file's mtime): retention goes by this. */
  storedAt: string;
  cluster: string;
  clusterUid: string;
  calico?: string;
  objects: number;
  snapshots: number;
  complete: boolean;
}

/** Every bundle object under an s3:// prefix, newest first (completed uploads only: S3 lists nothing else). */
export async function listRemoteBundles(url: string, onSkip?: (p: string, why: string) => void): Promise<RemoteListed[]> {
  const loc = parseS3Url(url);
  const client = await s3();
  const { ListObjectsV2Command, HeadObjectCommand } = await import('@aws-sdk/client-s3');
  const out: RemoteListed[] = [];
  let token: string | undefined;
  try {
    do {
      const page = await client.send(
        new ListObjectsV2Command({ Bucket: loc.bucket, Prefix: loc.key ? `${loc.key}/` : undefined, Delimiter: '/', ContinuationToken: token }),
      );
      for (const o of page.Contents ?? []) {
        if (!o.Key?.endsWith(ARCHIVE)) continue;
        const head = await client.send(new HeadObjectCommand({ Bucket: loc.bucket, Key: o.Key }));
        const m = head.Metadata ?? {};
        const shown = `s3://${loc.bucket}/${o.Key}`;
        if (!m['bundle-id'] || !m['created-at']) {
          onSkip?.(shown, 'not written by cni-rewind (no bundle metadata)');
          continue;
        }
        out.push({
          path: shown,
          id: m['bundle-id'],
          createdAt: m['created-at'],
          storedAt: (o.LastModified ?? new Date(0)).toISOString(),
          cluster: m.cluster ?? '',
          clusterUid: m['cluster-uid'] ?? '',
          calico: m.calico || undefined,
          objects: Number(m.objects ?? 0),
          snapshots: Number(m.snapshots ?? 0),
          complete: m.complete !== 'false',
        });
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  } catch (err) {
    throw storageError(`cannot list ${url}`, err);
  }
  return out.sort(newestStoredFirst);
}

export const newestStoredFirst = (a: Pick<RemoteListed, 'storedAt'>, b: Pick<RemoteListed, 'storedAt'>) =>
  a.storedAt < b.storedAt ? 1 : a.storedAt > b.storedAt ? -1 : 0;

/** Delete one bundle object (prune). A bucket's object lock or retention refuses it; that is reported, not forced. */
export async function deleteRemoteBundle(url: string): Promise<void> {
  const loc = parseS3Url(url);
  const { DeleteObjectCommand } = await import('@aws-sdk/client-s3');
  try {
    await (await s3()).send(new DeleteObjectCommand({ Bucket: loc.bucket, Key: loc.key }));
  } catch (err) {
    throw storageError(`cannot delete ${url} (object lock or retention may protect it)`, err);
  }
}

export interface OpenUpload {
  url: string;
  uploadId: string;
  initiated: string;
}

/**
 * Multipart uploads under an s3:// prefix that were begun before `before` and never completed or aborted: what an
 * export or backup killed half-way leaves (S3 keeps their parts, and bills them, until they are aborted). With
 * `abort`, they are aborted; a failure to abort one is reported through `onFailure` and the others still go.
 */
export async function staleUploads(
  url: string,
  before: Date,
  opts: { abort: boolean; onFailure?: (u: OpenUpload, why: string) => void },
): Promise<OpenUpload[]> {
  const loc = parseS3Url(url);
  const client = await s3();
  const { ListMultipartUploadsCommand, AbortMultipartUploadCommand } = await import('@aws-sdk/client-s3');
  const found: OpenUpload[] = [];
  let keyMarker: string | undefined;
  let uploadIdMarker: string | undefined;
  try {
    do {
      const page = await client.send(
        new ListMultipartUploadsCommand({
          Bucket: loc.bucket,
          Prefix: loc.key ? `${loc.key}/` : undefined,
          Delimiter: '/',
          KeyMarker: keyMarker,
          UploadIdMarker: uploadIdMarker,
        }),
      );
      for (const u of page.Uploads ?? []) {
        if (!u.Key?.endsWith(ARCHIVE) || !u.UploadId || !u.Initiated || u.Initiated >= before) continue;
        found.push({ url: `s3://${loc.bucket}/${u.Key}`, uploadId: u.UploadId, initiated: u.Initiated.toISOString() });
      }
      keyMarker = page.IsTruncated ? page.NextKeyMarker : undefined;
      uploadIdMarker = page.IsTruncated ? page.NextUploadIdMarker : undefined;
    } while (keyMarker);
  } catch (err) {
    throw storageError(`cannot list the open uploads under ${url}`, err);
  }
  if (!opts.abort) return found;
  const aborted: OpenUpload[] = [];
  for (const u of found) {
    try {
      await client.send(new AbortMultipartUploadCommand({ Bucket: loc.bucket, Key: parseS3Url(u.url).key, UploadId: u.uploadId }));
      aborted.push(u);
    } catch (err) {
      opts.onFailure?.(u, errorMessage(err));
    }
  }
  return aborted;
}

/**
 * Write a bundle to an s3:// location: `run` writes it as a local temporary archive (export and backup as usual),
 * which is then uploaded as one object; the result's `path` becomes the object's URL. `defaultName` (the usual
 * `<cluster>-<UTC time>`) names it when the location is a prefix.
 */
export async function writeRemote<R extends { path: string; manifest: BundleManifest }>(
  target: string,
  defaultName: string,
  run: (localArchive: string) => Promise<R>,
): Promise<R> {
  const loc = parseS3Url(target); // bad locations fail before any work is done
  // A run killed while uploading cannot remove this archive; the next one does (makeTempDir).
  const dir = makeTempDir('cni-rewind-s3-out-');
  try {
    // The archive's name becomes the bundle id, and the id the object's name under a prefix.
    const local = path.join(dir, loc.key.endsWith(ARCHIVE) ? path.posix.basename(loc.key) : `${defaultName}${ARCHIVE}`);
    const result = await run(local);
    const hash = createHash('sha256');
    await pipeline(createReadStream(local), hash);
    const url = await uploadBundle(local, target, result.manifest, hash.digest('hex'));
    return { ...result, path: url };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
