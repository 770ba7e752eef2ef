/**
 * Checks a bundle against its own manifest: every listed file present with the recorded size and sha256,
 * no file the manifest does not list, no links or special files, the counts matching the files, and the
 * bundle marked complete. Every problem names the file.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { MANIFEST_FILE, parsePackedResourcePath, parseResourcePath, isPackedPath, DIRS } from './paths.js';
import type { Bundle } from './reader.js';
import { JsonDepthScanner } from '../util/depth.js';
import { pool } from '../util/pool.js';
import { MAX_OBJECT_DEPTH } from './format.js';

export interface VerifyProblem {
  file: string;
  problem: string;
}

export interface VerifyResult {
  ok: boolean;
  problems: VerifyProblem[];
  /** Files checked against their checksums. */
  checked: number;
}

export interface VerifyOptions {
  /** The bundle was opened with its key: decrypt every encrypted file too (proves each is at its own path). */
  decrypt?: boolean;
}

export async function verifyBundle(bundle: Bundle, opts: VerifyOptions = {}): Promise<VerifyResult> {
  const problems: VerifyProblem[] = [];
  const m = bundle.manifest;
  const onDisk = new Set<string>();
  await walk(bundle.root, '', onDisk, problems);

  let checked = 0;
  const packs = Number(m.formatVersion.split('.')[0]) >= 2;
  const listed = Object.entries(m.files).sort(([a], [b]) => (a < b ? -1 : 1));
  // Hash a few files at a time: I/O bound, and 100k small files would take long one by one.
  await pool(listed, 8, async ([rel, entry]) => {
    if (!onDisk.has(rel)) {
      problems.push({ file: rel, problem: 'missing' });
      return;
    }
    const packed = packs && isPackedPath(rel);
    const { size, hash, lines, depth } = await hashFile(path.join(bundle.root, rel), packed);
    checked++;
    if (size !== entry.size) problems.push({ file: rel, problem: `size ${size} differs from the manifest (${entry.size})` });
    else if (hash !== entry.sha256) problems.push({ file: rel, problem: 'sha256 does not match the manifest (file edited or corrupted)' });
    else if (packed && lines !== entry.objects)
      problems.push({ file: rel, problem: `holds ${lines} lines, but the manifest says ${entry.objects ?? 'nothing about'} objects` });
    else if (depth > MAX_OBJECT_DEPTH) problems.push({ file: rel, problem: `holds an object nested ${depth} deep (at most ${MAX_OBJECT_DEPTH})` });
  });
  // Object.hasOwn, not `in`: an unlisted file named constructor or __proto__ is still unlisted.
  for (const f of onDisk) if (!Object.hasOwn(m.files, f)) problems.push({ file: f, problem: 'not listed in the manifest (extra file)' });

  // Completeness: each resource type's count equals the files of that kind, and nothing is uncounted.
  const perKind = new Map<string, number>();
  for (const [f, e] of Object.entries(m.files)) {
    const packed = packs && isPackedPath(f) ? parsePackedResourcePath(f) : undefined;
    const p = packed ?? parseResourcePath(f);
    if (p) perKind.set(`${p.group}\0${p.kind}`, (perKind.get(`${p.group}\0${p.kind}`) ?? 0) + (packed ? (e.objects ?? 0) : 1));
  }
  for (const r of m.resources) {
    const n = perKind.get(`${r.group}\0${r.kind}`) ?? 0;
    perKind.delete(`${r.group}\0${r.kind}`);
    if (n !== r.count || m.counts[r.key] !== r.count)
      problems.push({ file: MANIFEST_FILE, problem: `${r.key}: counted ${m.counts[r.key] ?? 'nothing'} / ${r.count}, but the bundle holds ${n} objects` });
  }
  for (const [k, n] of perKind)
    problems.push({ file: MANIFEST_FILE, problem: `${n} ${k.replace('\0', ' ')} objects belong to no resource type in the manifest` });
  const crdFiles = Object.keys(m.files).filter((f) => f.startsWith(DIRS.crds + '/')).length;
  const crdKey = 'customresourcedefinitions.apiextensions.k8s.io';
  if (Object.hasOwn(m.counts, crdKey) && m.counts[crdKey] !== crdFiles)
    problems.push({ file: MANIFEST_FILE, problem: `${crdKey}: counted ${m.counts[crdKey]}, but the bundle holds ${crdFiles} CRD files` });
  if (opts.decrypt && !problems.length) {
    for (const [rel, entry] of listed) {
      if (!entry.encrypted) continue;
      await bundle.readObject(rel).catch((err: Error) => problems.push({ file: rel, problem: err.message.replace(/^.*?: (cannot decrypt )/, '$1') }));
    }
  }
  if (!m.complete) problems.push({ file: MANIFEST_FILE, problem: 'the bundle is marked incomplete (a disk snapshot failed or did not finish)' });

  problems.sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : 0));
  return { ok: problems.length === 0, problems, checked };
}

async function walk(root: string, rel: string, out: Set<string>, problems: VerifyProblem[]): Promise<void> {
  const entries = await fs.readdir(path.join(root, rel), { withFileTypes: true });
  for (const e of entries) {
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) await walk(root, r, out, problems);
    else if (e.isFile()) {
      if (r !== MANIFEST_FILE) out.add(r);
    } else problems.push({ file: r, problem: e.isSymbolicLink() ? 'is a symbolic link (bundles hold only regular files)' : 'is not a regular file' });
  }
}

/** Size, sha256 and lines of a file; of a packed (JSON lines) file also its deepest nesting, seen without parsing it. */
function hashFile(file: string, packed: boolean): Promise<{ size: number; hash: string; lines: number; depth: number }> {
  return new Promise((resolve, reject) => {
    const h = createHash('sha256');
    const scanner = packed ? new JsonDepthScanner() : undefined;
    let size = 0;
    let lines = 0;
    createReadStream(file)
      .on('data', (c) => {
        const b = c as Buffer;
        size += b.length;
        h.update(b);
        scanner?.update(b);
        for (let i = b.indexOf(0x0a); i >= 0; i = b.indexOf(0x0a, i + 1)) lines++;
      })
      .on('end', () => resolve({ size, hash: h.digest('hex'), lines, depth: scanner?.deepest ?? 0 }))
      .on('error', reject);
  });
}
