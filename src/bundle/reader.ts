/**
 * Opens a bundle (a directory or a .tar.gz) for reading. The manifest is validated first: a path that is
 * not a bundle, a newer major format, or a manifest edited into nonsense gives one clear BadInputError.
 * Objects are read lazily, one file at a time, and each file's checksum is checked as it is read, so a
 * hand-edited file is never silently used (by restore, diff or doctor).
 */
import fs from 'node:fs/promises';
import { lstatSync, readFileSync } from 'node:fs';
import path from 'node:path';
import yaml from 'js-yaml';
import { BadInputError, isErrorKind } from '../core/errors.js';
import type { KubeObject } from '../kube/types.js';
import { extractArchive, readArchiveManifest } from './archive.js';
import { decrypt, isBoundCiphertext, manifestMacValid } from './crypto.js';
import { depthExceeds } from '../util/depth.js';
import { BUNDLE_FORMAT_VERSION, MAX_OBJECT_DEPTH, OLDEST_READ_MAJOR } from './format.js';
import {
  DIRS,
  ETCD_IPAM_PATH,
  MANIFEST_FILE,
  isPackedPath,
  objectPathMismatch,
  parsePackedResourcePath,
  parseResourcePath,
  unsafePathReason,
} from './paths.js';
import { readPacked } from './packed.js';
import { fetchBundle, isRemote } from './remote.js';
import type { BundleManifest, BundleObject, ResourceTypeEntry } from './types.js';
import { sha256 } from './writer.js';

export interface ObjectFilter {
  /** API groups, e.g. `crd.projectcalico.org`. */
  groups?: string[];
  /** Kinds, matched case-insensitively against kind, plural or `<plural>.<group>` (e.g. `IPPool`, `ippools`). */
  kinds?: string[];
  /**
   * Yield an object whose content does not match its path with `problem` set, instead of failing the whole
   * read (restore refuses such objects one by one and restores the rest).
   */
  lenient?: boolean;
}

export interface Bundle {
  /** Directory holding the bundle files (a private temporary copy for an archive). */
  root: string;
  /** What the user named: the directory or the archive. */
  source: string;
  manifest: BundleManifest;
  objects(filter?: ObjectFilter): AsyncIterable<BundleObject>;
  crds(): Promise<KubeObject[]>;
  /** ConfigMaps, Secrets, the operator Deployment, the calico-node DaemonSet. */
  configObjects(opts?: { lenient?: boolean }): AsyncIterable<BundleObject>;
  /** The projectcalico.org/v3 view, when it was exported. */
  v3Objects(): AsyncIterable<BundleObject>;
  /** Per-node records: Node objects with only the projectcalico.org/* annotations and spec.providerID. */
  nodeObjects(): AsyncIterable<BundleObject>;
  /** An etcd-datastore bundle's IPAM records (EtcdRecord objects, calico/etcd-datastore.ts); none in any other bundle. */
  etcdIpamRecords(): AsyncIterable<BundleObject>;
  /** Read and parse one file, checking its checksum (and decrypting it when a key was given). */
  readObject(relPath: string): Promise<KubeObject>;
  close(): Promise<void>;
}

export interface OpenBundleOptions {
  /** Key for bundles whose Secret files are encrypted. */
  encryptionKey?: Buffer;
}

export async function openBundle(location: string, opts: OpenBundleOptions = {}): Promise<Bundle> {
  // An s3:// bundle is downloaded to a private temporary archive first; messages still name the URL.
  const p = isRemote(location) ? await fetchBundle(location) : location;
  let st;
  try {
    st = await fs.stat(p);
  } catch {
    throw new BadInputError(`${p}: no such bundle (file or directory not found)`);
  }
  if (st.isDirectory()) {
    const text = await readManifestFile(p);
    const manifest = authenticated(parseManifest(text, p), text, p, opts.encryptionKey);
    return new BundleImpl(path.resolve(p), p, manifest, undefined, opts.encryptionKey);
  }
  if (!st.isFile()) throw new BadInputError(`${p} is not a bundle (neither a directory nor a .tar.gz file)`);
  await checkArchiveMagic(p, location);
  const root = await extractArchive(p);
  try {
    const text = await readManifestFile(root, location);
    const manifest = authenticated(parseManifest(text, location), text, location, opts.encryptionKey);
    return new BundleImpl(root, location, manifest, root, opts.encryptionKey);
  } catch (err) {
    await fs.rm(root, { recursive: true, force: true });
    throw err;
  }
}

/**
 * With a key, an encrypted bundle's manifest must carry a valid MAC. One without (format 1.0, which had none) is
 * refused: relabelling a bundle 1.0.0 and dropping its MAC would otherwise turn the check off.
 */
function authenticated(m: BundleManifest, text: string, shown: string, key: Buffer | undefined): BundleManifest {
  if (!key || !m.encryption) return m;
  if (m.encryption.mac === undefined) {
    throw new BadInputError(`${shown}: ${MANIFEST_FILE} of this encrypted bundle carries no authentication code, so it is not read with a key`, {
      hint: 'format 1.0 bundles had none: export again with this version; nothing was read from the bundle',
    });
  }
  if (!manifestMacValid(key, JSON.parse(text))) {
    throw new BadInputError(`${shown}: ${MANIFEST_FILE} fails its authentication check (edited after export, or this is not the bundle's key)`, {
      hint: 'nothing was read from the bundle',
    });
  }
  return m;
}

/** Just the manifest (for `list`): reads an archive only up to manifest.json. */
export async function readBundleManifest(location: string): Promise<BundleManifest> {
  const p = isRemote(location) ? await fetchBundle(location) : location;
  const st = await fs.stat(p).catch(() => undefined);
  if (!st) throw new BadInputError(`${p}: no such bundle (file or directory not found)`);
  if (st.isDirectory()) return parseManifest(await readManifestFile(p), p);
  // Opening a FIFO for reading waits for a writer: one in the backups folder hung `list` and `prune`.
  if (!st.isFile()) throw new BadInputError(`${p} is not a bundle (neither a directory nor a .tar.gz file)`);
  await checkArchiveMagic(p, location);
  const buf = await readArchiveManifest(p);
  if (!buf) throw new BadInputError(`${location} is not a bundle: the archive holds no ${MANIFEST_FILE}`);
  return parseManifest(buf.toString('utf8'), location);
}

/** `shown` is what the user named (an s3:// URL rather than the temporary file it was downloaded to). */
async function checkArchiveMagic(p: string, shown: string): Promise<void> {
  const fh = await fs.open(p, 'r');
  try {
    const { buffer, bytesRead } = await fh.read(Buffer.alloc(2), 0, 2, 0);
    if (bytesRead < 2 || buffer[0] !== 0x1f || buffer[1] !== 0x8b)
      throw new BadInputError(`${shown} is not a bundle (not a directory and not a gzip-compressed tar archive)`);
  } finally {
    await fh.close();
  }
}

async function readManifestFile(dir: string, shown = dir): Promise<string> {
  try {
    const st = await fs.lstat(path.join(dir, MANIFEST_FILE));
    if (!st.isFile()) throw new Error('not a regular file');
    if (st.size > 512 * 1024 * 1024) throw new BadInputError(`${shown}: ${MANIFEST_FILE} is implausibly large`);
    return await fs.readFile(path.join(dir, MANIFEST_FILE), 'utf8');
  } catch (err) {
    if (isErrorKind(err, 'bad-input')) throw err;
    throw new BadInputError(`${shown} is not a bundle: it has no ${MANIFEST_FILE}`, { hint: 'an interrupted export leaves no manifest; export again' });
  }
}

/** Check the manifest's shape and format version. Exported for tests and for tools that build manifests. */
export function parseManifest(text: string, shown: string): BundleManifest {
  let m: any;
  try {
    m = JSON.parse(text);
  } catch (err) {
    throw new BadInputError(`${shown}: ${MANIFEST_FILE} is not valid JSON (${(err as Error).message})`);
  }
  if (!m || typeof m !== 'object' || Array.isArray(m)) throw new BadInputError(`${shown}: ${MANIFEST_FILE} is not a bundle manifest`);
  const fv = m.formatVersion;
  const mm = typeof fv === 'string' ? /^(\d+)\.(\d+)\.(\d+)$/.exec(fv) : null;
  if (!mm) throw new BadInputError(`${shown}: ${MANIFEST_FILE} has no valid formatVersion`);
  const ours = Number(BUNDLE_FORMAT_VERSION.split('.')[0]);
  const reads = OLDEST_READ_MAJOR === ours ? `${ours}.x` : `${OLDEST_READ_MAJOR}.x to ${ours}.x`;
  if (Number(mm[1]) > ours) {
    throw new BadInputError(`${shown} uses bundle format ${fv}, newer than this cni-rewind reads (${reads})`, { hint: 'upgrade cni-rewind to read it' });
  }
  if (Number(mm[1]) < OLDEST_READ_MAJOR) throw new BadInputError(`${shown} uses bundle format ${fv}, older than this cni-rewind reads (${reads})`);
  const need: [string, (v: any) => boolean][] = [
    ['id', (v) => typeof v === 'string'],
    ['createdAt', (v) => typeof v === 'string' && !Number.isNaN(Date.parse(v))],
    ['cluster', (v) => !!v && typeof v === 'object' && typeof v.uid === 'string'],
    ['calico', (v) => !!v && typeof v === 'object'],
    ['counts', (v) => !!v && typeof v === 'object' && Object.values(v).every((n) => Number.isInteger(n) && (n as number) >= 0)],
    ['resources', (v) => Array.isArray(v)],
    ['files', (v) => !!v && typeof v === 'object' && !Array.isArray(v)],
    ['notes', (v) => Array.isArray(v)],
    ['snapshots', (v) => Array.isArray(v)],
    ['datastore', (v) => v === undefined || (!!v && v.type === 'etcd' && typeof v.revision === 'string')],
  ];
  // A manifest nested thousands deep would overflow the stack of whatever renders it (inspect -o yaml).
  if (depthExceeds(m, 32)) throw new BadInputError(`${shown}: ${MANIFEST_FILE} is nested deeper than a bundle manifest can be`);
  for (const [k, ok] of need) if (!ok(m[k])) throw new BadInputError(`${shown}: ${MANIFEST_FILE} has a missing or invalid "${k}"`);
  for (const [f, e] of Object.entries<any>(m.files)) {
    const bad = unsafePathReason(f);
    if (bad || f === MANIFEST_FILE) throw new BadInputError(`${shown}: ${MANIFEST_FILE} lists an unsafe file ${JSON.stringify(f)} (${bad ?? 'reserved name'})`);
    if (!e || typeof e.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(e.sha256) || !Number.isInteger(e.size))
      throw new BadInputError(`${shown}: ${MANIFEST_FILE} has an invalid entry for ${f}`);
    if (e.objects !== undefined && !(Number.isInteger(e.objects) && e.objects >= 0 && !e.secret && !e.encrypted))
      throw new BadInputError(`${shown}: ${MANIFEST_FILE} has an invalid entry for ${f}`);
  }
  m.secretsExcluded = !!m.secretsExcluded;
  m.complete = m.complete !== false;
  return m as BundleManifest;
}

/** Does a resource type entry match one of the user's kind words? */
export function matchesKind(r: Pick<ResourceTypeEntry, 'kind' | 'plural' | 'key'>, words: string[]): boolean {
  return words.some((w) => {
    const x = w.toLowerCase();
    return x === r.kind.toLowerCase() || x === r.plural.toLowerCase() || x === r.key.toLowerCase();
  });
}

class BundleImpl implements Bundle {
  constructor(
    readonly root: string,
    readonly source: string,
    readonly manifest: BundleManifest,
    private readonly tempDir: string | undefined,
    private readonly key: Buffer | undefined,
  ) {}

  private filesUnder(prefix: string): string[] {
    return Object.keys(this.manifest.files)
      .filter((f) => f.startsWith(prefix + '/'))
      .sort();
  }

  async readObject(rel: string): Promise<KubeObject> {
    const { object, problem } = this.load(rel);
    if (problem) throw new BadInputError(`${this.source}: ${problem}`);
    return object;
  }

  /** Folders already checked to be real directories inside the root (no link on the way). */
  private readonly realDirs = new Set<string>();

  /** Every folder on the way to `rel` must be a directory, not a link that leads out of the bundle. */
  private checkDirs(rel: string): void {
    const segs = rel.split('/');
    let dir = '';
    for (const seg of segs.slice(0, -1)) {
      dir = dir ? `${dir}/${seg}` : seg;
      if (this.realDirs.has(dir)) continue;
      const st = lstatSync(path.join(this.root, dir));
      if (!st.isDirectory())
        throw new BadInputError(
          `${this.source}: ${dir} is ${st.isSymbolicLink() ? 'a symbolic link' : 'not a directory'}; a bundle holds only directories and regular files`,
        );
      this.realDirs.add(dir);
    }
  }

  /** Read, check and parse one file; `problem` when the object does not belong at its path. */
  private load(rel: string): { object: KubeObject; problem?: string } {
    const entry = Object.hasOwn(this.manifest.files, rel) ? this.manifest.files[rel] : undefined;
    if (!entry) throw new BadInputError(`${this.source}: ${rel} is not listed in the manifest`);
    if (this.packs && isPackedPath(rel)) throw new BadInputError(`${this.source}: ${rel} holds many objects (a packed file), not one`);
    let data: Buffer;
    try {
      // Only regular files, reached through real directories: a link inside a bundle directory could point anywhere.
      // Synchronous on purpose: bundle files are small and read one after another, and the promise API's
      // thread-pool round trips made reading 10,000 of them take 2.8 s where these calls take 0.4 s.
      this.checkDirs(rel);
      if (!lstatSync(path.join(this.root, rel)).isFile()) throw new BadInputError(`${this.source}: ${rel} is not a regular file`);
      data = readFileSync(path.join(this.root, rel));
    } catch (err) {
      if (isErrorKind(err, 'bad-input')) throw err;
      throw new BadInputError(`${this.source}: ${rel} is missing`, { hint: `run: cni-rewind verify ${this.source}` });
    }
    if (sha256(data) !== entry.sha256)
      throw new BadInputError(`${this.source}: ${rel} does not match its checksum (edited or corrupted)`, { hint: `run: cni-rewind verify ${this.source}` });
    if (entry.encrypted) {
      if (!this.key) throw new BadInputError(`${this.source}: ${rel} is encrypted; give the bundle key to read it`);
      // A manifest with a MAC promises path-bound ciphertexts: an unbound one was put there by someone else.
      if (this.manifest.encryption?.mac && !isBoundCiphertext(data))
        throw new BadInputError(`${this.source}: cannot decrypt ${rel}: it is not bound to its path (format 1.0 ciphertext in a format 1.1 bundle)`);
      data = decrypt(this.key, data, rel);
    }
    let obj: any;
    try {
      obj = yaml.load(data.toString('utf8'));
    } catch (err) {
      throw new BadInputError(`${this.source}: ${rel} is not valid YAML`);
    }
    if (
      !obj ||
      typeof obj !== 'object' ||
      typeof obj.apiVersion !== 'string' ||
      typeof obj.kind !== 'string' ||
      typeof obj.metadata?.name !== 'string' ||
      !['string', 'undefined'].includes(typeof obj.metadata.namespace)
    ) {
      throw new BadInputError(`${this.source}: ${rel} is not a Kubernetes object`);
    }
    if (depthExceeds(obj, MAX_OBJECT_DEPTH)) throw new BadInputError(`${this.source}: ${rel} is nested deeper than a Kubernetes object can be`);
    return { object: obj as KubeObject, problem: objectPathMismatch(rel, obj) };
  }

  private yieldable(rel: string, lenient: boolean | undefined): BundleObject {
    const { object, problem } = this.load(rel);
    if (problem && !lenient) throw new BadInputError(`${this.source}: ${problem}`);
    return { path: rel, object, ...(problem ? { problem } : {}) };
  }

  /** Format 2 and later: `.jsonl` files are packed kinds (in a 1.x bundle such a name is no object file). */
  private get packs(): boolean {
    return Number(this.manifest.formatVersion.split('.')[0]) >= 2;
  }

  /** Every object of a packed file, streamed, after its checksum was checked (see packed.ts). */
  private async *packed(rel: string, lenient: boolean | undefined, namespaced?: boolean): AsyncIterable<BundleObject> {
    const entry = this.manifest.files[rel]!;
    this.checkDirs(rel);
    for await (const object of readPacked(path.join(this.root, rel), entry, `${this.source}: ${rel}`)) {
      let problem = objectPathMismatch(rel, object);
      if (!problem && namespaced !== undefined && namespaced !== !!object.metadata.namespace) {
        problem = `${rel} holds ${object.kind} ${object.metadata.namespace ?? ''}/${object.metadata.name}, ${namespaced ? 'without the namespace its kind needs' : 'with a namespace its cluster-scoped kind has not'}`;
      }
      if (problem && !lenient) throw new BadInputError(`${this.source}: ${problem}`);
      yield { path: rel, object, ...(problem ? { problem } : {}) };
    }
  }

  async *objects(filter: ObjectFilter = {}): AsyncIterable<BundleObject> {
    const types = this.manifest.resources.filter(
      (r) => (!filter.groups?.length || filter.groups.includes(r.group)) && (!filter.kinds?.length || matchesKind(r, filter.kinds)),
    );
    const wanted = new Map(types.map((t) => [`${t.group}\0${t.kind}`, t]));
    for (const f of this.filesUnder(DIRS.resources)) {
      const packed = this.packs && isPackedPath(f) ? parsePackedResourcePath(f) : undefined;
      if (packed) {
        const t = wanted.get(`${packed.group}\0${packed.kind}`);
        if (t) yield* this.packed(f, filter.lenient, t.namespaced);
        continue;
      }
      const p = parseResourcePath(f);
      if (!p || !wanted.has(`${p.group}\0${p.kind}`)) continue;
      yield this.yieldable(f, filter.lenient);
    }
  }

  async crds(): Promise<KubeObject[]> {
    const out: KubeObject[] = [];
    for (const f of this.filesUnder(DIRS.crds)) out.push(await this.readObject(f));
    return out;
  }

  async *configObjects(opts: { lenient?: boolean } = {}): AsyncIterable<BundleObject> {
    for (const f of this.filesUnder(DIRS.config)) yield this.yieldable(f, opts.lenient);
  }

  async *v3Objects(): AsyncIterable<BundleObject> {
    for (const f of this.filesUnder(DIRS.v3)) {
      if (this.packs && isPackedPath(f)) yield* this.packed(f, false);
      else yield { path: f, object: await this.readObject(f) };
    }
  }

  async *nodeObjects(): AsyncIterable<BundleObject> {
    for (const f of this.filesUnder(DIRS.nodes)) yield { path: f, object: await this.readObject(f) };
  }

  async *etcdIpamRecords(): AsyncIterable<BundleObject> {
    if (Object.hasOwn(this.manifest.files, ETCD_IPAM_PATH)) yield* this.packed(ETCD_IPAM_PATH, false);
  }

  async close(): Promise<void> {
    if (this.tempDir) await fs.rm(this.tempDir, { recursive: true, force: true });
  }
}
