/**
 * Bad-input corpus: malformed and hostile bundles (directories and hand-built tar.gz archives),
 * bad plan files, bad config/mapping files, unknown providers and kinds, a broken --provider-module and wrong
 * flags, for every command that takes input. Each case runs the built CLI in its own sandbox and checks:
 *   - the documented exit code (2 bad input, 4 environment, 5 refused);
 *   - one clear `cni-rewind: ...` line on stderr (optionally one indented hint line), no stack trace;
 *   - nothing written anywhere in the sandbox (input files, cwd and TMPDIR compared before/after), so a
 *     `../../x`, an absolute path or a link in an archive never lands on disk, and no temp dir is leaked.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { packageRoot } from '../../src/core/package-root.js';
import { applyFixture, runCli, testClient } from './helpers.js';
import { populateCalico } from './population.js';
import { trustCases, trustSetup, type TrustBase } from './trust-cases.js';

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

function tarHeader(e: TarEntry, size: number): Buffer {
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

function tarball(entries: TarEntry[]): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    const body = Buffer.from(e.body ?? '');
    parts.push(tarHeader(e, e.claimedSize ?? body.length), body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  parts.push(Buffer.alloc(1024));
  return gzipSync(Buffer.concat(parts));
}

/** Every regular file and directory of a bundle directory as tar entries (manifest.json first, like the writer). */
function bundleEntries(dir: string): TarEntry[] {
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
function tree(root: string): string[] {
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

const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

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
  code: 2 | 4 | 5;
  /** What the one line must say. */
  message: RegExp;
  /** Extra assertions after the run. */
  after?: (sb: Sandbox) => void;
  env?: Record<string, string>;
}

let base: string; // a valid directory bundle of the test cluster
let baseTgz: string; // the same as a .tar.gz written by the tool
let work: string;
const ABS_TARGET = `/tmp/cnr-g-pwned-${process.pid}`;

/** A private copy of the base bundle, edited by `edit` (paths relative to the bundle). */
function bundleCopy(sb: Sandbox, edit: (dir: string, manifest: any) => void, name = 'b'): string {
  const dir = path.join(sb.in, name);
  fs.cpSync(base, dir, { recursive: true });
  const mf = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
  edit(dir, mf);
  if (fs.existsSync(path.join(dir, 'manifest.json')) && fs.lstatSync(path.join(dir, 'manifest.json')).isFile() && !(mf as any).__raw) {
    fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify(mf, null, 2));
  }
  return dir;
}
const rawManifest = (text: string) => (dir: string, mf: any) => {
  mf.__raw = true;
  fs.writeFileSync(path.join(dir, 'manifest.json'), text);
};
/** Any object file of the bundle (an IP pool: always present in the population). */
const someObject = (mf: any): string => Object.keys(mf.files).find((f) => f.includes('/IPPool/'))!;
/** Rewrite a listed file and fix its checksum, so only the content is bad. */
function rewriteListed(dir: string, mf: any, rel: string, content: string): void {
  fs.writeFileSync(path.join(dir, rel), content);
  mf.files[rel] = { ...mf.files[rel], sha256: sha256(content), size: Buffer.byteLength(content) };
}
function writeIn(sb: Sandbox, name: string, content: string | Buffer): string {
  const p = path.join(sb.in, name);
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, content);
  return p;
}
const tgzIn = (sb: Sandbox, entries: TarEntry[], name = 'x.tar.gz') => writeIn(sb, name, tarball(entries));
const manifestEntry = (): TarEntry => ({ name: 'manifest.json', body: fs.readFileSync(path.join(base, 'manifest.json')) });

const trust = {} as TrustBase;
const trustList = trustCases(trust, { bundleCopy, writeIn, tgzIn, manifestEntry, someObject, sha256 });
const cases: Case[] = [
  // ---- malformed bundle directories ----
  {
    name: 'manifest.json is not JSON (inspect)',
    code: 2,
    message: /manifest\.json is not valid JSON/,
    args: (sb) => ['inspect', bundleCopy(sb, rawManifest('{"formatVersion": "1.0.0",'))],
  },
  {
    name: 'manifest.json is a JSON array (verify)',
    code: 2,
    message: /manifest\.json is not a bundle manifest/,
    args: (sb) => ['verify', bundleCopy(sb, rawManifest('[1,2,3]'))],
  },
  { name: 'manifest.json is empty (diff)', code: 2, message: /manifest\.json is not valid JSON/, args: (sb) => ['diff', bundleCopy(sb, rawManifest(''))] },
  {
    name: 'manifest.json is YAML, not JSON (restore)',
    code: 2,
    message: /manifest\.json is not valid JSON/,
    args: (sb) => ['restore', bundleCopy(sb, rawManifest('formatVersion: 1.0.0\nid: x\n')), '--resources', '--dry-run'],
  },
  {
    name: 'manifest without formatVersion (inspect)',
    code: 2,
    message: /no valid formatVersion/,
    args: (sb) => ['inspect', bundleCopy(sb, (_, m) => delete m.formatVersion)],
  },
  {
    name: 'formatVersion is not semver (verify)',
    code: 2,
    message: /no valid formatVersion/,
    args: (sb) => ['verify', bundleCopy(sb, (_, m) => (m.formatVersion = 'one'))],
  },
  {
    name: 'newer format major (restore)',
    code: 2,
    message: /format 3\.0\.0, newer than this cni-rewind reads/,
    args: (sb) => ['restore', bundleCopy(sb, (_, m) => (m.formatVersion = '3.0.0')), '--resources', '--dry-run'],
  },
  {
    name: 'newer format major (doctor offline)',
    code: 2,
    message: /format 9\.1\.0, newer than this cni-rewind reads/,
    args: (sb) => ['doctor', bundleCopy(sb, (_, m) => (m.formatVersion = '9.1.0'))],
  },
  {
    name: 'older format major (verify)',
    code: 2,
    message: /format 0\.9\.0, older than this cni-rewind reads/,
    args: (sb) => ['verify', bundleCopy(sb, (_, m) => (m.formatVersion = '0.9.0'))],
  },
  {
    name: 'manifest lists ../../x (inspect)',
    code: 2,
    message: /lists an unsafe file "\.\.\/\.\.\/x" \('\.\.' in path\)/,
    args: (sb) => ['inspect', bundleCopy(sb, (_, m) => (m.files['../../x'] = { sha256: sha256('x'), size: 1 }))],
  },
  {
    name: 'manifest lists an absolute path (verify)',
    code: 2,
    message: /lists an unsafe file "\/etc\/passwd" \(absolute path\)/,
    args: (sb) => ['verify', bundleCopy(sb, (_, m) => (m.files['/etc/passwd'] = { sha256: sha256('x'), size: 1 }))],
  },
  {
    name: 'manifest lists a backslash path (diff)',
    code: 2,
    message: /unsafe file .*backslash/,
    args: (sb) => ['diff', bundleCopy(sb, (_, m) => (m.files['..\\..\\x'] = { sha256: sha256('x'), size: 1 }))],
  },
  {
    name: 'manifest file entry with a bad sha256 (inspect)',
    code: 2,
    message: /invalid entry for/,
    args: (sb) => ['inspect', bundleCopy(sb, (_, m) => (m.files[someObject(m)].sha256 = 'xyz'))],
  },
  {
    name: 'negative count (inspect)',
    code: 2,
    message: /missing or invalid "counts"/,
    args: (sb) => ['inspect', bundleCopy(sb, (_, m) => (m.counts[Object.keys(m.counts)[0]!] = -1))],
  },
  {
    name: 'manifest without cluster identity (restore)',
    code: 2,
    message: /missing or invalid "cluster"/,
    args: (sb) => ['restore', bundleCopy(sb, (_, m) => delete m.cluster), '--resources', '--dry-run'],
  },
  {
    name: 'createdAt is not a date (plan refuses the bundle)',
    code: 5,
    message: /the plan's bundle cannot be used: .*missing or invalid "createdAt"/,
    args: (sb) => ['plan', '--to', '3.27.4', '--bundle', bundleCopy(sb, (_, m) => (m.createdAt = 'yesterday'))],
  },
  { name: 'files is an array (verify)', code: 2, message: /missing or invalid "files"/, args: (sb) => ['verify', bundleCopy(sb, (_, m) => (m.files = []))] },
  {
    name: 'object file is not YAML, checksum fixed (diff)',
    code: 2,
    message: /is not valid YAML/,
    args: (sb) => ['diff', bundleCopy(sb, (d, m) => rewriteListed(d, m, someObject(m), 'spec: [unclosed\n  : : :'))],
  },
  {
    name: 'object file is YAML but not a Kubernetes object (restore)',
    code: 2,
    message: /is not a Kubernetes object/,
    args: (sb) => ['restore', bundleCopy(sb, (d, m) => rewriteListed(d, m, someObject(m), '- just\n- a list\n')), '--resources', '--dry-run'],
  },
  {
    name: 'object file edited, checksum not (verify names it)',
    code: 2,
    message: /problem|verif|checksum|sha256/i,
    args: (sb) => ['verify', bundleCopy(sb, (d, m) => fs.appendFileSync(path.join(d, someObject(m)), '# edited\n'))],
  },
  {
    name: 'object file edited, checksum not (restore refuses it)',
    code: 2,
    message: /does not match its checksum/,
    args: (sb) => ['restore', bundleCopy(sb, (d, m) => fs.appendFileSync(path.join(d, someObject(m)), '# edited\n')), '--resources', '--dry-run'],
  },
  {
    name: 'listed object file missing (diff)',
    code: 2,
    message: /is missing/,
    args: (sb) => ['diff', bundleCopy(sb, (d, m) => fs.rmSync(path.join(d, someObject(m))))],
  },
  {
    name: 'extra file not in the manifest (verify)',
    code: 2,
    message: /problem|verif/i,
    args: (sb) => ['verify', bundleCopy(sb, (d) => fs.writeFileSync(path.join(d, 'resources', 'planted.yaml'), 'x: 1\n'))],
  },
  {
    name: 'object file replaced by a symlink to /etc/passwd (verify)',
    code: 2,
    message: /problem|verif/i,
    args: (sb) => [
      'verify',
      bundleCopy(sb, (d, m) => {
        fs.rmSync(path.join(d, someObject(m)));
        fs.symlinkSync('/etc/passwd', path.join(d, someObject(m)));
      }),
    ],
  },
  {
    name: 'manifest.json is a symlink (inspect)',
    code: 2,
    message: /is not a bundle: it has no manifest\.json/,
    args: (sb) => [
      'inspect',
      bundleCopy(sb, (d, m) => {
        m.__raw = true;
        fs.renameSync(path.join(d, 'manifest.json'), path.join(sb.in, 'real-manifest.json'));
        fs.symlinkSync(path.join(sb.in, 'real-manifest.json'), path.join(d, 'manifest.json'));
      }),
    ],
  },
  {
    name: 'manifest.json is a directory (verify)',
    code: 2,
    message: /is not a bundle: it has no manifest\.json/,
    args: (sb) => [
      'verify',
      bundleCopy(sb, (d, m) => {
        m.__raw = true;
        fs.rmSync(path.join(d, 'manifest.json'));
        fs.mkdirSync(path.join(d, 'manifest.json'));
      }),
    ],
  },
  {
    name: 'huge (sparse 600 MB) manifest.json (inspect)',
    code: 2,
    message: /implausibly large/,
    args: (sb) => [
      'inspect',
      bundleCopy(sb, (d, m) => {
        m.__raw = true;
        fs.truncateSync(path.join(d, 'manifest.json'), 600 * 1024 * 1024);
      }),
    ],
  },
  { name: 'bundle marked incomplete (verify)', code: 2, message: /problem|verif/i, args: (sb) => ['verify', bundleCopy(sb, (_, m) => (m.complete = false))] },
  {
    name: 'counts disagree with the files (verify)',
    code: 2,
    message: /problem|verif/i,
    args: (sb) => [
      'verify',
      bundleCopy(sb, (_, m) => {
        const r = m.resources.find((x: any) => x.count > 0);
        r.count += 5;
        m.counts[r.key] = r.count;
      }),
    ],
  },
  {
    name: 'an empty directory is not a bundle (inspect)',
    code: 2,
    message: /is not a bundle: it has no manifest\.json/,
    args: (sb) => ['inspect', fs.mkdtempSync(path.join(sb.in, 'empty-'))],
  },
  {
    name: 'a directory of random files is not a bundle (verify)',
    code: 2,
    message: /is not a bundle: it has no manifest\.json/,
    args: (sb) => {
      writeIn(sb, 'junk/a.yaml', 'a: 1');
      return ['verify', path.join(sb.in, 'junk')];
    },
  },
  { name: 'no such bundle (inspect)', code: 2, message: /no such bundle/, args: (sb) => ['inspect', path.join(sb.in, 'does-not-exist')] },
  {
    name: 'a plain text file is not a bundle (verify)',
    code: 2,
    message: /is not a bundle \(not a directory and not a gzip/,
    args: (sb) => ['verify', writeIn(sb, 'notes.txt', 'hello')],
  },
  { name: 'a device is not a bundle (inspect /dev/null)', code: 2, message: /not a bundle/, args: () => ['inspect', '/dev/null'] },
  {
    name: 'doctor on a directory that is not a bundle',
    code: 2,
    message: /is not a bundle: it has no manifest\.json/,
    args: (sb) => ['doctor', fs.mkdtempSync(path.join(sb.in, 'nb-'))],
  },

  // ---- hostile archives ----
  {
    name: 'tar.gz with ../../x (inspect)',
    code: 2,
    message: /unsafe entry "\.\.\/\.\.\/x" \('\.\.' in path\)/,
    args: (sb) => ['inspect', tgzIn(sb, [manifestEntry(), { name: '../../x', body: 'pwned' }])],
  },
  {
    name: 'tar.gz with ./../../x (restore)',
    code: 2,
    message: /unsafe entry/,
    args: (sb) => ['restore', tgzIn(sb, [manifestEntry(), { name: './../../x', body: 'pwned' }]), '--resources', '--dry-run'],
  },
  {
    name: 'tar.gz with resources/../../../x (verify)',
    code: 2,
    message: /unsafe entry/,
    args: (sb) => ['verify', tgzIn(sb, [manifestEntry(), { name: 'resources/../../../x', body: 'pwned' }])],
  },
  {
    name: 'tar.gz with an absolute path (verify)',
    code: 2,
    message: /unsafe entry .*absolute path/,
    args: (sb) => ['verify', tgzIn(sb, [manifestEntry(), { name: ABS_TARGET, body: 'pwned' }])],
    after: () => expect(fs.existsSync(ABS_TARGET)).toBe(false),
  },
  {
    name: 'tar.gz with a backslash path (diff)',
    code: 2,
    message: /unsafe entry .*backslash/,
    args: (sb) => ['diff', tgzIn(sb, [manifestEntry(), { name: '..\\..\\x', body: 'pwned' }])],
  },
  {
    name: 'tar.gz with a symlink to / (inspect)',
    code: 2,
    message: /SymbolicLink entry "crds"/,
    args: (sb) => ['inspect', tgzIn(sb, [manifestEntry(), { name: 'crds', type: '2', linkname: '/' }, { name: 'crds/x.yaml', body: 'pwned' }])],
  },
  {
    name: 'tar.gz with a symlink to ../../ (doctor)',
    code: 2,
    message: /SymbolicLink entry/,
    args: (sb) => ['doctor', tgzIn(sb, [manifestEntry(), { name: 'up', type: '2', linkname: '../../' }, { name: 'up/x', body: 'pwned' }])],
  },
  {
    name: 'tar.gz with a hard link to /etc/passwd (verify)',
    code: 2,
    message: /Link entry "passwd"/,
    args: (sb) => ['verify', tgzIn(sb, [manifestEntry(), { name: 'passwd', type: '1', linkname: '/etc/passwd' }])],
  },
  {
    name: 'tar.gz with a character device (inspect)',
    code: 2,
    message: /CharacterDevice entry/,
    args: (sb) => ['inspect', tgzIn(sb, [manifestEntry(), { name: 'zero', type: '3' }])],
  },
  { name: 'tar.gz with a FIFO (verify)', code: 2, message: /FIFO entry/, args: (sb) => ['verify', tgzIn(sb, [manifestEntry(), { name: 'pipe', type: '6' }])] },
  {
    name: 'tar.gz whose header claims an 8 GB file (inspect)',
    code: 2,
    message: /larger than a bundle may be|truncated/,
    args: (sb) => ['inspect', tgzIn(sb, [manifestEntry(), { name: 'crds/huge.yaml', body: 'x', claimedSize: 8 * 1024 ** 3 - 1 }])],
  },
  {
    name: 'gzip bomb: 80 MB of zeros in one entry (verify)',
    code: 2,
    message: /larger than a bundle may be|decompression|ratio/i,
    args: (sb) => ['verify', tgzIn(sb, [manifestEntry(), { name: 'crds/zeros.yaml', body: Buffer.alloc(80 * 1024 * 1024) }])],
  },
  {
    name: 'truncated tar.gz written by the tool (verify)',
    code: 2,
    message: /truncated|not a valid gzip/,
    args: (sb) => {
      const full = fs.readFileSync(baseTgz);
      return ['verify', writeIn(sb, 'trunc.tar.gz', full.subarray(0, Math.floor(full.length / 2)))];
    },
  },
  {
    name: 'truncated tar.gz (restore)',
    code: 2,
    message: /truncated|not a valid gzip/,
    args: (sb) => {
      const full = fs.readFileSync(baseTgz);
      return ['restore', writeIn(sb, 'trunc.tar.gz', full.subarray(0, full.length - 100)), '--resources', '--dry-run'];
    },
  },
  {
    name: 'gzip of garbage, not tar (inspect)',
    code: 2,
    message: /cannot be read as a bundle archive|not a valid|truncated|not a bundle/,
    args: (sb) => ['inspect', writeIn(sb, 'g.tar.gz', gzipSync(Buffer.from('this is not a tar archive at all '.repeat(100))))],
  },
  {
    name: 'gzip magic followed by garbage (verify)',
    code: 2,
    message: /not a valid gzip|truncated|cannot be read/,
    args: (sb) => ['verify', writeIn(sb, 'm.tar.gz', Buffer.concat([Buffer.from([0x1f, 0x8b]), Buffer.from('garbage'.repeat(50))]))],
  },
  {
    name: 'tar.gz listing manifest.json twice (inspect)',
    code: 2,
    message: /lists manifest\.json twice/,
    args: (sb) => ['inspect', tgzIn(sb, [manifestEntry(), manifestEntry()])],
  },
  {
    name: 'tar.gz without manifest.json (verify)',
    code: 2,
    message: /is not a bundle: it has no manifest\.json/,
    args: (sb) => [
      'verify',
      tgzIn(sb, [
        { name: 'crds/', type: '5' },
        { name: 'crds/a.yaml', body: 'a: 1\n' },
      ]),
    ],
  },
  {
    name: 'tar.gz with the bundle one directory down (inspect)',
    code: 2,
    message: /is not a bundle: it has no manifest\.json/,
    args: (sb) => [
      'inspect',
      tgzIn(
        sb,
        bundleEntries(base).map((e) => ({ ...e, name: `nested/${e.name}` })),
      ),
    ],
  },
  {
    name: 'tar.gz of a newer format major (restore)',
    code: 2,
    message: /format 3\.0\.0, newer/,
    args: (sb) => {
      const m = JSON.parse(fs.readFileSync(path.join(base, 'manifest.json'), 'utf8'));
      return [
        'restore',
        tgzIn(sb, [{ name: 'manifest.json', body: JSON.stringify({ ...m, formatVersion: '3.0.0' }) }, ...bundleEntries(base).slice(1)]),
        '--resources',
        '--dry-run',
      ];
    },
  },
  {
    name: 'tar.gz with an edited object (verify names the file)',
    code: 2,
    message: /problem|verif/i,
    args: (sb) => {
      const es = bundleEntries(base);
      const e = es.find((x) => x.name.includes('/IPPool/') && x.name.endsWith('.yaml'))!;
      e.body = Buffer.concat([Buffer.from(e.body!), Buffer.from('# edited\n')]);
      return ['verify', tgzIn(sb, es)];
    },
  },

  // ---- plan files (apply) and plan flags ----
  { name: 'apply: no such plan file', code: 2, message: /no such plan file/, args: (sb) => ['apply', path.join(sb.in, 'nope.yaml'), '--yes'] },
  { name: 'apply: plan file is not YAML', code: 2, message: /is not a plan/, args: (sb) => ['apply', writeIn(sb, 'p.yaml', 'steps: [\n  {: :'), '--yes'] },
  {
    name: 'apply: YAML of another kind',
    code: 2,
    message: /is not a cni-rewind plan/,
    args: (sb) => ['apply', writeIn(sb, 'p.yaml', 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n'), '--yes'],
  },
  {
    name: 'apply: plan without steps',
    code: 2,
    message: /the plan has no steps|is not a cni-rewind plan/,
    args: (sb) => ['apply', writeIn(sb, 'p.json', JSON.stringify({ ...planSkeleton(), steps: undefined })), '--yes'],
  },
  {
    name: 'apply: plan id with path separators',
    code: 2,
    message: /is not a plain name|is not a cni-rewind plan/,
    args: (sb) => ['apply', writeIn(sb, 'p.json', JSON.stringify({ ...planSkeleton(), id: '../../etc/cron.d/x' })), '--yes'],
  },
  { name: 'apply: plan is a directory', code: 2, message: /no such plan file|not a plan|plan file .* is a directory/, args: (sb) => ['apply', sb.in, '--yes'] },
  { name: 'plan: --to is not a version', code: 2, message: /version|X\.Y\.Z/i, args: () => ['plan', '--to', 'latest'] },
  {
    name: 'plan: --manifests folder does not exist',
    code: 2,
    message: /manifests|not found|no such/i,
    args: (sb) => ['plan', '--to', '3.29.9', '--manifests', path.join(sb.in, 'nope'), '--bundle', path.join(sb.in, 'nob')],
  },
  {
    name: 'plan: --bundle does not exist (refused)',
    code: 5,
    message: /the plan's bundle cannot be used: .*no such bundle/,
    args: (sb) => ['plan', '--to', '3.27.4', '--bundle', path.join(sb.in, 'nope')],
  },
  {
    name: 'plan: --max-backup-age is not a duration',
    code: 2,
    message: /is not a duration/,
    args: () => ['plan', '--to', '3.27.4', '--bundle', base, '--max-backup-age', 'banana'],
  },
  { name: 'plan: --strategy not a choice', code: 2, message: /Invalid values|strategy/, args: () => ['plan', '--to', '3.28.1', '--strategy', 'yolo'] },

  // ---- config, mapping, providers (backup) ----
  {
    name: 'backup: --config does not exist',
    code: 2,
    message: /cannot read config file/,
    args: (sb) => ['backup', '--config', path.join(sb.in, 'nope.yaml'), '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'backup: --config is not YAML',
    code: 2,
    message: /is not valid YAML/,
    args: (sb) => ['backup', '--config', writeIn(sb, 'c.yaml', 'providers: {aws: [\n'), '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'backup: --config with an unknown key',
    code: 2,
    message: /unknown key\(s\) pwn/,
    args: (sb) => ['backup', '--config', writeIn(sb, 'c.yaml', 'pwn: 1\n'), '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'backup: --config backup.concurrency not a positive integer',
    code: 2,
    message: /backup\.concurrency must be a positive integer/,
    args: (sb) => ['backup', '--config', writeIn(sb, 'c.yaml', 'backup: {concurrency: -4}\n'), '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'backup: --mapping is a list',
    code: 2,
    message: /node mapping must be a YAML map/,
    args: (sb) => ['backup', '--mapping', writeIn(sb, 'm.yaml', '- a\n- b\n'), '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'backup: --mapping nodes entry not a map',
    code: 2,
    message: /must be a map of provider keys/,
    args: (sb) => ['backup', '--mapping', writeIn(sb, 'm.yaml', 'nodes:\n  n1: 42\n'), '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'backup: --mapping does not exist',
    code: 2,
    message: /cannot read node mapping file/,
    args: (sb) => ['backup', '--mapping', path.join(sb.in, 'nope.yaml'), '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'backup: unknown provider',
    code: 2,
    message: /unknown provider 'nosuchcloud'/,
    args: (sb) => ['backup', '--provider', 'nosuchcloud', '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'backup: --provider-module that does not exist',
    code: 2,
    message: /provider module .* not found/,
    args: (sb) => ['backup', '--provider-module', path.join(sb.in, 'nope.mjs'), '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'backup: --provider-module with a syntax error',
    code: 2,
    message: /failed to load/,
    args: (sb) => ['backup', '--provider-module', writeIn(sb, 'broken.mjs', 'export default {{{;\n'), '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'backup: --provider-module that throws on import',
    code: 2,
    message: /failed to load: boom at import/,
    args: (sb) => ['backup', '--provider-module', writeIn(sb, 'throws.mjs', 'throw new Error("boom at import");\n'), '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'backup: --provider-module exporting no provider',
    code: 2,
    message: /exports no provider|is not a valid cni-rewind provider: apiVersion is missing/,
    args: (sb) => ['backup', '--provider-module', writeIn(sb, 'empty.mjs', 'export const x = 1;\n'), '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'backup: --provider-module of a future provider API',
    code: 2,
    message: /is not a valid cni-rewind provider/,
    args: (sb) => [
      'backup',
      '--provider-module',
      writeIn(sb, 'future.mjs', 'export default { apiVersion: "cni-rewind.io/provider/v99", name: "f", create() { return {}; } };\n'),
      '--out',
      path.join(sb.cwd, 'out'),
    ],
  },
  {
    name: 'backup: --snapshot-timeout is not a duration',
    code: 2,
    message: /is not a duration/,
    args: (sb) => ['backup', '--snapshot-timeout', 'soon', '--out', path.join(sb.cwd, 'out')],
  },

  // ---- wrong flags and values ----
  { name: 'unknown command', code: 2, message: /Unknown argument|Did you mean|unknown/i, args: () => ['exprot'] },
  { name: 'unknown flag', code: 2, message: /Unknown argument/i, args: () => ['inspect', base, '--frobnicate'] },
  {
    name: 'a single-value flag given twice',
    code: 2,
    message: /--drain-timeout was given more than once/,
    args: () => ['plan', '--to', '3.27.4', '--bundle', base, '--reboot-nodes', '--drain-timeout', '1m', '--drain-timeout', '2m'],
  },
  {
    name: 'plan --reboot-nodes --drain-timeout is not a duration',
    code: 2,
    message: /--drain-timeout.*not a duration|is not a duration/,
    args: () => ['plan', '--to', '3.27.4', '--bundle', base, '--reboot-nodes', '--no-disk-snapshots', '--drain-timeout', 'soon'],
  },
  { name: '-o with an unknown format', code: 2, message: /Invalid values/, args: () => ['inspect', base, '-o', 'xml'] },
  { name: 'inspect without a bundle', code: 2, message: /Not enough non-option arguments|bundle/i, args: () => ['inspect'] },
  { name: 'restore with neither --resources nor --disks', code: 2, message: /--resources|--disks/, args: () => ['restore', base] },
  { name: 'restore --existing not a choice', code: 2, message: /Invalid values/, args: () => ['restore', base, '--resources', '--existing', 'merge'] },
  {
    name: 'restore --kinds with an unknown kind',
    code: 2,
    message: /NoSuchKind/,
    args: () => ['restore', base, '--resources', '--dry-run', '--kinds', 'NoSuchKind'],
  },
  { name: 'diff --kinds with an unknown kind', code: 2, message: /NoSuchKind/, args: () => ['diff', base, '--kinds', 'NoSuchKind'] },
  { name: 'doctor --target is not a version', code: 2, message: /version|X\.Y\.Z/i, args: () => ['doctor', base, '--target', 'banana'] },
  { name: 'list on a file instead of a directory', code: 2, message: /not a directory|directory/, args: (sb) => ['list', writeIn(sb, 'f.txt', 'x')] },
  { name: 'export --out that already exists', code: 2, message: /already exists/, args: () => ['export', '--out', base] },
  {
    name: 'export --out under a regular file',
    code: 2,
    message: /not a directory|cannot|ENOTDIR/i,
    args: (sb) => ['export', '--out', path.join(writeIn(sb, 'file', 'x'), 'b')],
  },
  {
    name: 'export --kubeconfig that does not exist',
    code: 2,
    message: /kubeconfig/i,
    args: (sb) => ['export', '--kubeconfig', path.join(sb.in, 'nokc'), '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'status --kubeconfig that is not YAML',
    code: 2,
    message: /kubeconfig/i,
    args: (sb) => ['status', '--kubeconfig', writeIn(sb, 'kc', 'clusters: [\n')],
  },
  {
    name: 'export against an unreachable API server (environment)',
    code: 4,
    message: /cannot reach the Kubernetes API server/,
    env: { CNI_REWIND_KUBE_RETRY_MS: '500' },
    args: (sb) => [
      'export',
      '--out',
      path.join(sb.cwd, 'out'),
      '--kubeconfig',
      writeIn(
        sb,
        'kc',
        `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: abcdefgh}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n`,
      ),
    ],
  },
  {
    name: 'restore of a bundle from another cluster (refused)',
    code: 5,
    message: /another cluster|other cluster|different cluster/i,
    args: (sb) => ['restore', bundleCopy(sb, (_, m) => (m.cluster.uid = '00000000-0000-0000-0000-000000000000')), '--resources', '--yes'],
  },
  // ---- trust boundaries (plans, journals, bundles and key files as hostile input) ----
  ...trustList,
];

function planSkeleton() {
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

describe('bad input: one clear line, the documented exit code, nothing written', () => {
  let client: KubeClient;

  beforeAll(async () => {
    client = await testClient();
    await applyFixture(client, '3.28.1', 'tigera-operator.yaml');
    await populateCalico(client, { prefix: 'bad', nodes: ['bad-node-1'], customResources: false });
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-bad-input-'));
    base = path.join(work, 'base');
    baseTgz = path.join(work, 'base.tar.gz');
    const r = await runCli(['export', '--out', base]);
    expect(r.code, r.stderr).toBe(0);
    const t = await runCli(['export', '--out', baseTgz, '--exclude-secrets']);
    expect(t.code, t.stderr).toBe(0);
    expect((await runCli(['verify', base])).code).toBe(0);
    Object.assign(trust, await trustSetup(work, base));
  });
  afterAll(() => {
    client?.close();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('the corpus has at least 100 cases with distinct names, and docs/RELIABILITY.md gives its true size', () => {
    expect(cases.length).toBeGreaterThanOrEqual(100);
    expect(new Set(cases.map((c) => c.name)).size).toBe(cases.length);
    const doc = fs.readFileSync(path.join(packageRoot(), 'docs', 'RELIABILITY.md'), 'utf8');
    expect(doc.match(/is a corpus of (\d+) cases/)?.[1], 'the count in docs/RELIABILITY.md').toBe(String(cases.length));
    expect(doc.match(/the (\d+) cases of issue 18 live in/)?.[1], 'the issue-18 count in docs/RELIABILITY.md').toBe(String(trustList.length));
  });

  for (const c of cases) {
    it.concurrent(c.name, async () => {
      const root = fs.mkdtempSync(path.join(work, 'sb-'));
      const sb: Sandbox = { root, in: path.join(root, 'in'), cwd: path.join(root, 'cwd'), tmp: path.join(root, 'tmp', 'a', 'b') };
      for (const d of [sb.in, sb.cwd, sb.tmp]) fs.mkdirSync(d, { recursive: true });
      const args = c.args(sb);
      const before = tree(root);
      const baseBefore = tree(base);
      const r = await runCli(args, { cwd: sb.cwd, env: { TMPDIR: sb.tmp, ...c.env }, timeoutMs: 120_000 });
      const what = `${args.join(' ')}\n--- stderr:\n${r.stderr}\n--- stdout:\n${r.stdout.slice(0, 2000)}`;
      expect(r.code, what).toBe(c.code);
      // Progress lines may come first; the error is one `cni-rewind:` line at the end, optionally followed by one hint line.
      const lines = r.stderr.replace(/\n$/, '').split('\n');
      const errLines = lines.filter((l) => l.startsWith('cni-rewind: '));
      expect(errLines.length, `exactly one error line: ${what}`).toBe(1);
      const tail = lines.slice(lines.indexOf(errLines[0]!) + 1);
      expect(tail.length, `at most a hint after the error line: ${what}`).toBeLessThanOrEqual(1);
      if (tail[0] !== undefined) expect(tail[0], what).toMatch(/^ {2}\S/);
      expect(r.stderr, what).toMatch(c.message);
      expect(r.stderr + r.stdout, `no stack trace: ${what}`).not.toMatch(/\n\s+at .+[(:]\d+|node:internal|unexpected error/);
      expect(tree(root), `nothing written in the sandbox (inputs, cwd, TMPDIR): ${what}`).toEqual(before);
      expect(tree(base), 'the base bundle is untouched').toEqual(baseBefore);
      c.after?.(sb);
      fs.rmSync(root, { recursive: true, force: true });
    });
  }
});
