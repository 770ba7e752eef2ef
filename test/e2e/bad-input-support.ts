/** The bad-input corpus's tools: a tar writer for hostile archives, sandboxes, and copies of the base bundle. */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';

// ---------- a minimal ustar writer: hostile archives are built byte by byte, never committed as binaries ----------

export interface TarEntry {
  name: string;
  /** '0' file, '1' hard link, '2' symlink, '3' char device, '5' directory, '6' FIFO */
  type?: string;
  body?: Buffer | string;
  linkname?: string;
  /** Header size field, when it should lie about the body. */
  claimedSize?: number;
}

export function tarHeader(e: TarEntry, size: number): Buffer {
  const h = Buffer.alloc(512);
  const put = (s: string, off: number, len: number) => h.write(s, off, Math.min(len, Buffer.byteLength(s)), 'utf8');
  const oct = (n: number, len: number) => n.toString(8).padStart(len - 1, '0') + '\0';
  put(e.name, 0, 100);
  put(oct(e.type === '5' ? 0o755 : 0o644, 8), 100, 8);
  put(oct(0, 8), 108, 8);
  put(oct(0, 8), 116, 8);
  put(oct(size, 12), 124, 12);
  put(oct(Math.floor(Date.now() / 1000), 12), 136, 12);
  h.fill(' ', 148, 156);
  put(e.type ?? '0', 156, 1);
  put(e.linkname ?? '', 157, 100);
  put('ustar\0', 257, 6);
  put('00', 263, 2);
  let sum = 0;
  for (const b of h) sum += b;
  put(sum.toString(8).padStart(6, '0') + '\0 ', 148, 8);
  return h;
}

export function tarball(entries: TarEntry[]): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    const body = Buffer.from(e.body ?? '');
    parts.push(tarHeader(e, e.claimedSize ?? body.length), body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  parts.push(Buffer.alloc(1024));
  return gzipSync(Buffer.concat(parts));
}

/** Every regular file and directory of a bundle directory as tar entries (manifest.json first, like the writer). */
export function bundleEntries(dir: string): TarEntry[] {
  const out: TarEntry[] = [{ name: 'manifest.json', body: fs.readFileSync(path.join(dir, 'manifest.json')) }];
  const walk = (rel: string) => {
    for (const d of fs.readdirSync(path.join(dir, rel), { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const r = rel ? `${rel}/${d.name}` : d.name;
      if (d.isDirectory()) {
        out.push({ name: r + '/', type: '5' });
        walk(r);
      } else if (r !== 'manifest.json') out.push({ name: r, body: fs.readFileSync(path.join(dir, r)) });
    }
  };
  walk('');
  return out;
}

// ---------- sandbox bookkeeping ----------

/** Every entry under a directory with its type, and size+mtime for files (directory mtimes change when temp dirs come and go). */
export function tree(root: string): string[] {
  const out: string[] = [];
  const walk = (rel: string) => {
    for (const d of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
      const r = rel ? `${rel}/${d.name}` : d.name;
      const st = fs.lstatSync(path.join(root, r));
      if (d.isDirectory()) {
        out.push(`d ${r}`);
        walk(r);
      } else out.push(`${d.isSymbolicLink() ? 'l' : 'f'} ${r} ${st.size} ${st.mtimeMs}`);
    }
  };
  walk('');
  return out.sort();
}

export const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

export interface Sandbox {
  root: string;
  /** Where inputs are put. */
  in: string;
  /** The command's working directory. */
  cwd: string;
  /** TMPDIR for the command, two levels deep so `../../x` from an extraction dir stays inside the sandbox. */
  tmp: string;
}

export interface Case {
  name: string;
  /** Build the input; returns the CLI arguments. */
  args: (sb: Sandbox) => string[];
  code: 2 | 3 | 4 | 5;
  /** What the one line must say. */
  message: RegExp;
  /** Extra assertions after the run. */
  after?: (sb: Sandbox) => void;
  env?: Record<string, string>;
}

export let base: string; // a valid directory bundle of the test cluster
export let baseTgz: string; // the same as a .tar.gz written by the tool
export let work: string;

/** Set once by the test's beforeAll (live bindings: the cases read them when they run). */
export function setCorpusPaths(dir: string): void {
  work = dir;
  base = `${dir}/base`;
  baseTgz = `${dir}/base.tar.gz`;
}
export const ABS_TARGET = `/tmp/cnr-g-pwned-${process.pid}`;

/** A private copy of the base bundle, edited by `edit` (paths relative to the bundle). */
export function bundleCopy(sb: Sandbox, edit: (dir: string, manifest: any) => void, name = 'b'): string {
  const dir = path.join(sb.in, name);
  fs.cpSync(base, dir, { recursive: true });
  const mf = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
  edit(dir, mf);
  if (fs.existsSync(path.join(dir, 'manifest.json')) && fs.lstatSync(path.join(dir, 'manifest.json')).isFile() && !(mf as any).__raw) {
    fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify(mf, null, 2));
  }
  return dir;
}
export const rawManifest = (text: string) => (dir: string, mf: any) => {
  mf.__raw = true;
  fs.writeFileSync(path.join(dir, 'manifest.json'), text);
};
/** Any object file of the bundle (an IP pool: always present in the population). */
export const someObject = (mf: any): string => Object.keys(mf.files).find((f) => f.includes('/IPPool/'))!;
/** Rewrite a listed file and fix its checksum, so only the content is bad. */
export function rewriteListed(dir: string, mf: any, rel: string, content: string): void {
  fs.writeFileSync(path.join(dir, rel), content);
  mf.files[rel] = { ...mf.files[rel], sha256: sha256(content), size: Buffer.byteLength(content) };
}
export function writeIn(sb: Sandbox, name: string, content: string | Buffer): string {
  const p = path.join(sb.in, name);
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, content);
  return p;
}
export const tgzIn = (sb: Sandbox, entries: TarEntry[], name = 'x.tar.gz') => writeIn(sb, name, tarball(entries));
export const manifestEntry = (): TarEntry => ({ name: 'manifest.json', body: fs.readFileSync(path.join(base, 'manifest.json')) });

export function planSkeleton() {
  return {
    apiVersion: 'cni-rewind.io/v1',
    kind: 'Plan',
    id: 'p1',
    cluster: { uid: 'x' },
    target: { version: '3.28.1' },
    bundle: { path: '/nonexistent' },
    steps: [],
    transforms: [],
    options: {},
  };
}
