/**
 * Writes a bundle atomically: everything goes into a hidden temporary directory next to the target
 * (`.<name>.partial-<random>`), manifest.json is written last, and only `commit()` renames the result into
 * place (for a `.tar.gz` target, packs it to a temporary file and renames that). An export that dies half
 * way leaves a hidden directory without manifest.json, which no reader accepts and `list` ignores.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import yaml from 'js-yaml';
import * as tar from 'tar';
import { BadInputError } from '../core/errors.js';
import type { KubeObject } from '../kube/types.js';
import { toolVersion } from '../core/version.js';
import { encrypt, manifestMac } from './crypto.js';
import { BUNDLE_FORMAT_VERSION } from './format.js';
import { MANIFEST_FILE, isPackedPath, unsafePathReason } from './paths.js';
import type { BundleManifest } from './types.js';

export function isArchivePath(p: string): boolean {
  return /\.(tar\.gz|tgz)$/i.test(p);
}

/** The YAML every bundle file holds: stable, no line folding (long strings stay one line), no anchors. */
export function dumpYaml(obj: unknown): string {
  return yaml.dump(obj, { noRefs: true, lineWidth: -1 });
}

export interface BundleWriterOptions {
  secretsExcluded?: boolean;
  /** 32-byte key: Secret files are stored AES-256-GCM encrypted. */
  encryptionKey?: Buffer;
  /** The manifest's `encryption` record for that key (kdf, salt); `raw` when absent. */
  encryption?: BundleManifest['encryption'];
}

/** A packed file being written: `write` appends one object, `close` records it and returns its object count. */
export interface PackedFileWriter {
  write(obj: KubeObject): Promise<void>;
  close(): Promise<number>;
}

export class BundleWriter {
  private readonly madeDirs = new Set<string>();
  private readonly openPacks = new Set<string>();
  private finished = false;

  private constructor(
    readonly target: string,
    /** The temporary directory the bundle is built in. */
    readonly workDir: string,
    readonly manifest: BundleManifest,
    private readonly encryptionKey?: Buffer,
  ) {}

  static async open(outPath: string, opts: BundleWriterOptions = {}): Promise<BundleWriter> {
    const target = path.resolve(outPath);
    if (await exists(target)) throw new BadInputError(`${outPath} already exists`, { hint: 'choose a new --out path; a bundle is never overwritten' });
    const parent = path.dirname(target);
    await fs.mkdir(parent, { recursive: true, mode: 0o700 }).catch((e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOTDIR' || e.code === 'EEXIST')
        throw new BadInputError(`cannot write a bundle at ${outPath}: ${path.dirname(outPath)} is not a directory`);
      throw e;
    });
    const base = path.basename(target).replace(/\.(tar\.gz|tgz)$/i, '');
    const workDir = path.join(parent, `.${base}.partial-${randomBytes(4).toString('hex')}`);
    await fs.mkdir(workDir, { mode: 0o700 });
    await fs.chmod(workDir, 0o700); // umask may have narrowed the mode; never widen beyond 0700
    if (opts.encryptionKey && opts.encryptionKey.length !== 32) throw new BadInputError('the bundle encryption key must be 32 bytes');
    const manifest: BundleManifest = {
      formatVersion: BUNDLE_FORMAT_VERSION,
      id: base,
      createdAt: new Date().toISOString(),
      tool: { name: 'cni-rewind', version: toolVersion() },
      cluster: { uid: '', name: '', server: '', kubernetesVersion: '' },
      calico: { installType: 'none' },
      counts: {},
      resources: [],
      files: {},
      notes: [],
      secretsExcluded: !!opts.secretsExcluded,
      snapshots: [],
      complete: true,
    };
    if (opts.encryptionKey) manifest.encryption = { ...(opts.encryption ?? { algorithm: 'aes-256-gcm', kdf: 'raw' }) };
    return new BundleWriter(target, workDir, manifest, opts.encryptionKey);
  }

  /** Write one object as YAML at `relPath` and record its checksum. Secret files are 0600 (and encrypted with a key). */
  async writeObject(relPath: string, obj: KubeObject, opts: { secret?: boolean } = {}): Promise<void> {
    await this.writeFile(relPath, Buffer.from(dumpYaml(obj), 'utf8'), opts);
  }

  async writeFile(relPath: string, content: Buffer, opts: { secret?: boolean } = {}): Promise<void> {
    if (this.finished) throw new Error('bundle writer already committed or aborted');
    const bad = unsafePathReason(relPath);
    if (bad || relPath === MANIFEST_FILE) throw new BadInputError(`refusing to write bundle file ${JSON.stringify(relPath)}: ${bad ?? 'reserved name'}`);
    if (this.manifest.files[relPath]) throw new BadInputError(`bundle file ${relPath} written twice`);
    const encrypted = !!(opts.secret && this.encryptionKey);
    const data = encrypted ? encrypt(this.encryptionKey!, content, relPath) : content;
    const full = path.join(this.workDir, relPath);
    await this.mkdirFor(full);
    // Record before the write so two concurrent writes of one path are caught above.
    this.manifest.files[relPath] = {
      sha256: sha256(data),
      size: data.length,
      ...(opts.secret ? { secret: true } : {}),
      ...(encrypted ? { encrypted: true } : {}),
    };
    await fs.writeFile(full, data, { mode: opts.secret ? 0o600 : 0o644, flag: 'wx' });
  }

  /**
   * Open a packed file (format 2): objects appended one JSON line each, the checksum computed as they stream
   * out, so a kind of any size costs one open file and one manifest entry. `close()` records it; never Secrets.
   */
  async openPacked(relPath: string): Promise<PackedFileWriter> {
    if (this.finished) throw new Error('bundle writer already committed or aborted');
    const bad = unsafePathReason(relPath);
    if (bad || !isPackedPath(relPath))
      throw new BadInputError(`refusing to write packed bundle file ${JSON.stringify(relPath)}: ${bad ?? 'not a .jsonl path'}`);
    if (this.manifest.files[relPath] || this.openPacks.has(relPath)) throw new BadInputError(`bundle file ${relPath} written twice`);
    const full = path.join(this.workDir, relPath);
    await this.mkdirFor(full);
    this.openPacks.add(relPath);
    const fh = await fs.open(full, 'wx', 0o644);
    const hash = createHash('sha256');
    let size = 0;
    let objects = 0;
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    const flush = async () => {
      if (!pendingBytes) return;
      const buf = Buffer.concat(pending, pendingBytes);
      pending = [];
      pendingBytes = 0;
      await fh.write(buf);
    };
    return {
      write: async (obj: KubeObject) => {
        const line = Buffer.from(JSON.stringify(obj) + '\n', 'utf8');
        hash.update(line);
        size += line.length;
        objects++;
        pending.push(line);
        pendingBytes += line.length;
        // Buffered in ~1 MiB writes: one system call per few thousand small objects, memory bounded.
        if (pendingBytes >= 1 << 20) await flush();
      },
      close: async () => {
        try {
          await flush();
        } finally {
          await fh.close();
          this.openPacks.delete(relPath);
        }
        this.manifest.files[relPath] = { sha256: hash.digest('hex'), size, objects };
        return objects;
      },
    };
  }

  private async mkdirFor(full: string): Promise<void> {
    const dir = path.dirname(full);
    if (!this.madeDirs.has(dir)) {
      await fs.mkdir(dir, { recursive: true, mode: 0o700 });
      this.madeDirs.add(dir);
    }
  }

  /** Finish: write manifest.json, move the bundle into place. Returns the final path. */
  async commit(): Promise<string> {
    if (this.finished) throw new Error('bundle writer already committed or aborted');
    if (this.openPacks.size) throw new Error(`bundle writer committed with packed files still open: ${[...this.openPacks].join(', ')}`);
    this.finished = true;
    try {
      if (this.encryptionKey && this.manifest.encryption) {
        delete this.manifest.encryption.mac;
        this.manifest.encryption.mac = manifestMac(this.encryptionKey, this.manifest);
      }
      await writeFileAtomic(path.join(this.workDir, MANIFEST_FILE), JSON.stringify(this.manifest, null, 2) + '\n', 0o644);
      if (await exists(this.target)) throw new BadInputError(`${this.target} appeared while the bundle was written; not overwriting it`);
      if (isArchivePath(this.target)) {
        const tmp = `${this.workDir}.tar.gz`;
        // manifest.json first, so `list` can read it without decompressing the whole archive.
        const entries = [MANIFEST_FILE, ...(await fs.readdir(this.workDir)).filter((e) => e !== MANIFEST_FILE).sort()];
        await pipeline(tar.create({ gzip: true, cwd: this.workDir, portable: true, noDirRecurse: false }, entries), createWriteStream(tmp, { mode: 0o600 }));
        await fs.rename(tmp, this.target);
        await fs.rm(this.workDir, { recursive: true, force: true });
      } else {
        await fs.rename(this.workDir, this.target);
      }
      return this.target;
    } catch (err) {
      await this.cleanup();
      throw err;
    }
  }

  async abort(): Promise<void> {
    this.finished = true;
    await this.cleanup();
  }

  private async cleanup(): Promise<void> {
    await fs.rm(this.workDir, { recursive: true, force: true });
    await fs.rm(`${this.workDir}.tar.gz`, { force: true });
  }
}

export function sha256(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}

async function exists(p: string): Promise<boolean> {
  try {
    await fs.lstat(p);
    return true;
  } catch {
    return false;
  }
}

/** Write a file through a temporary name and rename, so a reader never sees half of it. */
export async function writeFileAtomic(file: string, content: string | Buffer, mode = 0o644): Promise<void> {
  const tmp = `${file}.tmp-${randomBytes(4).toString('hex')}`;
  // 'wx': never through a link or into a file someone planted at the temporary name.
  await fs.writeFile(tmp, content, { mode, flag: 'wx' });
  await fs.rename(tmp, file);
}
