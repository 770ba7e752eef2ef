/**
 * Safe extraction of a bundle archive (.tar.gz). Archives come from anywhere (a colleague, a bucket, an
 * attacker), so only regular files and directories are accepted, every path is checked before anything is
 * written (no absolute paths, no `..`, no links, no devices), and entry count, entry size, total size and
 * the decompression ratio are bounded. Any violation or a truncated archive aborts with one clear line.
 */
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import * as tar from 'tar';
import { BadInputError } from '../core/errors.js';
import { MANIFEST_FILE, unsafePathReason } from './paths.js';
import { makeTempDir } from '../util/temp-dir.js';

export interface ExtractLimits {
  maxEntries: number;
  maxEntryBytes: number;
  maxTotalBytes: number;
}

export const DEFAULT_LIMITS: ExtractLimits = {
  maxEntries: 2_000_000,
  maxEntryBytes: 64 * 1024 * 1024,
  maxTotalBytes: 8 * 1024 * 1024 * 1024,
};

/** Strip a leading `./` that tar tools commonly add, and trailing slashes of directories. */
function cleanEntryPath(p: string): string {
  let q = p;
  while (q.startsWith('./')) q = q.slice(2);
  return q.replace(/\/+$/, '');
}

type EntryHandler = (rel: string, entry: tar.ReadEntry) => Promise<'continue' | 'stop'> | 'continue' | 'stop';

/** Walk an archive entry by entry, enforcing the rules; `onFile` consumes the body of each regular file. */
async function walkArchive(file: string, limits: ExtractLimits, onFile: EntryHandler, onDir?: (rel: string) => Promise<void>): Promise<void> {
  const name = path.basename(file);
  let entries = 0;
  let total = 0;
  let failure: Error | undefined;
  let stopped = false;
  let queue: Promise<void> = Promise.resolve();
  await new Promise<void>((resolve, reject) => {
    const input = createReadStream(file);
    const fail = (err: Error) => {
      if (failure || stopped) return;
      failure = err;
      input.destroy();
      reject(err);
    };
    const parser = new tar.Parser({
      strict: true,
      maxDecompressionRatio: 1000,
      onReadEntry: (entry) => {
        if (failure || stopped) return void entry.resume();
        const rel = cleanEntryPath(entry.path);
        entries++;
        if (entries > limits.maxEntries) return fail(new BadInputError(`${name} has more than ${limits.maxEntries} entries; refusing to read it`));
        if (entry.type === 'Directory') {
          entry.resume();
          if (rel === '') return;
          const bad = unsafePathReason(rel);
          if (bad) return fail(new BadInputError(`${name} contains an unsafe entry ${JSON.stringify(entry.path)} (${bad}); refusing to read it`));
          if (onDir) queue = queue.then(() => onDir(rel)).catch(fail);
          return;
        }
        if (entry.type !== 'File' && entry.type !== 'OldFile' && entry.type !== 'ContiguousFile') {
          entry.resume();
          return fail(new BadInputError(`${name} contains a ${entry.type} entry ${JSON.stringify(entry.path)}; a bundle holds only files and directories`));
        }
        const bad = unsafePathReason(rel);
        if (bad) {
          entry.resume();
          return fail(new BadInputError(`${name} contains an unsafe entry ${JSON.stringify(entry.path)} (${bad}); refusing to read it`));
        }
        total += entry.size;
        if (entry.size > limits.maxEntryBytes || total > limits.maxTotalBytes) {
          entry.resume();
          return fail(new BadInputError(`${name} is larger than a bundle may be (entry ${rel}); refusing to read it`));
        }
        // Consume bodies in order: the parser pauses on backpressure, so memory stays bounded.
        entry.pause();
        queue = queue
          .then(async () => {
            if (failure || stopped) return void entry.resume();
            const r = await onFile(rel, entry);
            if (r === 'stop') {
              stopped = true;
              input.destroy();
              resolve();
            }
          })
          .catch(fail);
      },
    });
    parser.on('error', (e: Error) => fail(archiveError(name, e)));
    parser.on('warn', (code: string, msg: string | Error) => {
      // In strict mode tar raises warnings as errors; non-strict warnings about paths are still fatal here.
      fail(archiveError(name, msg instanceof Error ? msg : new Error(`${code}: ${msg}`)));
    });
    input.on('error', (e) => fail(new BadInputError(`cannot read ${file}: ${e.message}`)));
    parser.on('end', () => {
      queue.then(() => (failure ? undefined : resolve()), fail);
    });
    input.pipe(parser as unknown as NodeJS.WritableStream);
  }).catch(async (err) => {
    // Let a file write already in flight finish, so the caller can remove everything that was extracted.
    // Bounded: a body still waiting for data from the aborted stream never finishes. The timer is not unref'd:
    // with that body the only thing pending, an unref'd timer let the process exit with the read unsettled
    // (an archive truncated inside a large file, e.g. a packed kind of format 2).
    await Promise.race([queue.catch(() => undefined), new Promise((r) => setTimeout(r, 500))]);
    throw err;
  });
  await queue;
  if (failure) throw failure;
}

function archiveError(name: string, e: Error): BadInputError {
  const code = (e as any).code as string | undefined;
  if (code === 'TAR_BAD_ARCHIVE' || /unexpected end|truncated/i.test(e.message))
    return new BadInputError(`${name} is truncated or not a complete tar.gz archive`);
  if (code === 'Z_DATA_ERROR' || code === 'Z_BUF_ERROR' || /zlib|incorrect header|invalid/i.test(e.message))
    return new BadInputError(`${name} is not a valid gzip-compressed bundle (${e.message})`);
  return new BadInputError(`${name} cannot be read as a bundle archive: ${e.message}`);
}

function readBody(entry: tar.ReadEntry, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let n = 0;
    entry.on('data', (c: Buffer) => {
      n += c.length;
      if (n > limit) reject(new BadInputError(`archive entry ${entry.path} is larger than its header says`));
      else chunks.push(c);
    });
    entry.on('end', () => resolve(Buffer.concat(chunks)));
    entry.on('error', reject);
    entry.resume();
  });
}

/** Extract an archive into a new private temporary directory; returns it. The caller removes it. */
export async function extractArchive(file: string, limits: ExtractLimits = DEFAULT_LIMITS): Promise<string> {
  const dest = makeTempDir('cni-rewind-bundle-');
  await fs.chmod(dest, 0o700);
  const made = new Set<string>([dest]);
  // A path listed both as a file and as a directory (`x` and `x/`, in either order) is refused in one line.
  const clash = (rel: string) =>
    new BadInputError(`${path.basename(file)} holds ${JSON.stringify(rel)} both as a file and as a directory; refusing to read it`);
  const mkdirp = async (dir: string) => {
    if (made.has(dir)) return;
    await fs.mkdir(dir, { recursive: true, mode: 0o700 }).catch((e: NodeJS.ErrnoException) => {
      if (e.code === 'EEXIST' || e.code === 'ENOTDIR') throw clash(path.relative(dest, dir));
      throw e;
    });
    made.add(dir);
  };
  try {
    await walkArchive(
      file,
      limits,
      async (rel, entry): Promise<'continue'> => {
        const full = path.join(dest, rel);
        // Belt and braces after unsafePathReason: the resolved path must stay inside dest.
        if (!full.startsWith(dest + path.sep)) throw new BadInputError(`${path.basename(file)} contains an entry outside the bundle: ${rel}`);
        await mkdirp(path.dirname(full));
        const body = await readBody(entry, limits.maxEntryBytes);
        // 'wx': an archive listing one path twice is refused rather than silently overwritten.
        await fs.writeFile(full, body, { mode: 0o600, flag: 'wx' }).catch((e: NodeJS.ErrnoException) => {
          if (e.code === 'EEXIST' && made.has(full)) throw clash(rel);
          if (e.code === 'EEXIST') throw new BadInputError(`${path.basename(file)} lists ${rel} twice`);
          if (e.code === 'EISDIR' || e.code === 'ENOTDIR') throw clash(rel);
          throw e;
        });
        return 'continue';
      },
      async (rel) => {
        const full = path.join(dest, rel);
        if (!full.startsWith(dest + path.sep)) throw new BadInputError(`${path.basename(file)} contains an entry outside the bundle: ${rel}`);
        await mkdirp(full);
      },
    );
    return dest;
  } catch (err) {
    // A write of an entry queued before the failure may still be finishing: retry instead of failing with ENOTEMPTY.
    await fs.rm(dest, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 });
    throw err;
  }
}

/** Read only manifest.json from an archive (written first by BundleWriter, so this is quick). */
export async function readArchiveManifest(file: string, limits: ExtractLimits = DEFAULT_LIMITS): Promise<Buffer | undefined> {
  let found: Buffer | undefined;
  await walkArchive(file, limits, async (rel, entry): Promise<'continue' | 'stop'> => {
    if (rel !== MANIFEST_FILE) {
      entry.resume();
      return 'continue';
    }
    found = await readBody(entry, limits.maxEntryBytes);
    return 'stop';
  });
  return found;
}
