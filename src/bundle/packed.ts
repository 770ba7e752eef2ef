/**
 * Reading a packed bundle file (format 2): one JSON object per line, one sha256 for the file. The file is
 * streamed twice through one open descriptor: first its size and checksum are checked, so nothing is handed to a
 * caller (restore writes what it reads) from a file that was edited; then it is parsed line by line, hashed
 * again, and a file that changed between the two passes fails at its end. Memory: one read buffer and one line.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import { BadInputError } from '../core/errors.js';
import type { KubeObject } from '../kube/types.js';
import { depthExceeds } from '../util/depth.js';
import { MAX_OBJECT_DEPTH } from './format.js';
import type { FileEntry } from './types.js';

const CHUNK = 1 << 20;

/** Whole chunks of the file, from the start, through one descriptor. */
async function* chunks(fh: fs.FileHandle): AsyncGenerator<Buffer> {
  const buf = Buffer.allocUnsafe(CHUNK);
  let pos = 0;
  for (;;) {
    const { bytesRead } = await fh.read(buf, 0, CHUNK, pos);
    if (!bytesRead) return;
    pos += bytesRead;
    yield buf.subarray(0, bytesRead);
  }
}

async function digest(fh: fs.FileHandle): Promise<{ sha256: string; size: number }> {
  const h = createHash('sha256');
  let size = 0;
  for await (const c of chunks(fh)) {
    h.update(c);
    size += c.length;
  }
  return { sha256: h.digest('hex'), size };
}

/** Is this parsed value shaped like a Kubernetes object (what every bundle file must hold)? */
export function isKubeObject(obj: any): obj is KubeObject {
  return (
    !!obj &&
    typeof obj === 'object' &&
    !Array.isArray(obj) &&
    typeof obj.apiVersion === 'string' &&
    typeof obj.kind === 'string' &&
    typeof obj.metadata?.name === 'string' &&
    ['string', 'undefined'].includes(typeof obj.metadata.namespace)
  );
}

/** The objects of a packed file, checked against its manifest entry. `shown` names the file in errors. */
export async function* readPacked(file: string, entry: FileEntry, shown: string): AsyncGenerator<KubeObject> {
  const verifyHint = { hint: 'run: cni-rewind verify on the bundle' };
  let fh: fs.FileHandle;
  try {
    // O_NOFOLLOW: a link planted at the file's own name is refused like any other link in a bundle.
    fh = await fs.open(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  } catch {
    throw new BadInputError(`${shown} is missing or not a regular file`, verifyHint);
  }
  try {
    if (!(await fh.stat()).isFile()) throw new BadInputError(`${shown} is not a regular file`);
    const first = await digest(fh);
    if (first.size !== entry.size || first.sha256 !== entry.sha256)
      throw new BadInputError(`${shown} does not match its checksum (edited or corrupted)`, verifyHint);
    const h = createHash('sha256');
    // The bytes of a line not finished by the chunk read so far.
    let rest: Buffer | undefined;
    let line = 0;
    const parse = (text: string): KubeObject => {
      line++;
      let obj: unknown;
      try {
        obj = JSON.parse(text);
      } catch {
        throw new BadInputError(`${shown}: line ${line} is not valid JSON`);
      }
      if (!isKubeObject(obj)) throw new BadInputError(`${shown}: line ${line} is not a Kubernetes object`);
      if (depthExceeds(obj, MAX_OBJECT_DEPTH)) throw new BadInputError(`${shown}: line ${line} is nested deeper than a Kubernetes object can be`);
      return obj;
    };
    for await (const c of chunks(fh)) {
      h.update(c);
      // Split on the byte 0x0a (never inside a UTF-8 multi-byte character), one line decoded at a time: decoding a
      // whole chunk made a 1 MiB string per chunk, which V8 keeps in its old generation until a full collection
      // (a pass over 100k handles left ~35 of them, and their copies, to collect); the unfinished line waits as bytes.
      let start = 0;
      for (let nl = c.indexOf(0x0a); nl >= 0; nl = c.indexOf(0x0a, start)) {
        const text = rest ? Buffer.concat([rest, c.subarray(start, nl)]).toString('utf8') : c.toString('utf8', start, nl);
        rest = undefined;
        start = nl + 1;
        yield parse(text);
      }
      // A copy: chunks() reuses its buffer.
      if (start < c.length) rest = rest ? Buffer.concat([rest, c.subarray(start)]) : Buffer.from(c.subarray(start));
    }
    if (rest?.length) yield parse(rest.toString('utf8'));
    if (h.digest('hex') !== entry.sha256 || line !== (entry.objects ?? line))
      throw new BadInputError(`${shown} changed while it was read, or holds ${line} objects where the manifest says ${entry.objects}`, verifyHint);
  } finally {
    await fh.close();
  }
}
