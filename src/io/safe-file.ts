/**
 * Opening files that someone else may have prepared: state files (the apply journal) that must never follow a
 * planted link, and small input files (kubeconfig, key files, plans) that must be regular files of a sane size,
 * so a FIFO, /dev/zero or a directory gives one clear line instead of a hang or an unexpected error.
 */
import { closeSync, constants, fstatSync, fchmodSync, openSync, readSync, type Stats } from 'node:fs';
import { BadInputError, RefusedError } from '../core/errors.js';

const { O_RDONLY, O_WRONLY, O_APPEND, O_CREAT, O_NOFOLLOW, O_NONBLOCK } = constants;

export const MAX_INPUT_FILE_BYTES = 16 * 1024 * 1024;

const myUid = (): number | undefined => (typeof process.getuid === 'function' ? process.getuid() : undefined);

/** Why an open state file must not be used, or undefined when it is fine. */
function stateFileProblem(st: Stats): string | undefined {
  if (!st.isFile()) return st.isDirectory() ? 'is a directory' : 'is not a regular file';
  const uid = myUid();
  if (uid !== undefined && st.uid !== uid) return `is owned by uid ${st.uid}, not by this user (uid ${uid})`;
  if (st.nlink > 1) return 'has other hard links';
  return undefined;
}

function refuseState(what: string, file: string, problem: string): RefusedError {
  return new RefusedError(`the ${what} ${file} ${problem}; refusing to use it`, { hint: 'remove or move it if you did not put it there' });
}

function openErrorProblem(err: NodeJS.ErrnoException): string | undefined {
  if (err.code === 'ELOOP' || err.code === 'EMLINK') return 'is a symbolic link';
  if (err.code === 'EISDIR') return 'is a directory';
  if (err.code === 'ENXIO' || err.code === 'EOPNOTSUPP') return 'is not a regular file';
  return undefined;
}

/**
 * Open a state file for appending (created 0600 when missing) without following a link, and check that it is a
 * regular file of this user; its mode is narrowed to 0600. Refusals exit 5.
 */
export function openStateFileForAppend(file: string, what: string): number {
  const { fd, st } = openState(file, what, O_WRONLY | O_APPEND | O_CREAT)!;
  try {
    if ((st.mode & 0o777) !== 0o600) fchmodSync(fd, 0o600);
    return fd;
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

/** Open without following a link (never blocking on a FIFO) and check the file; undefined when missing and not created. */
function openState(file: string, what: string, flags: number): { fd: number; st: Stats } | undefined {
  let fd: number;
  try {
    fd = openSync(file, flags | O_NOFOLLOW | O_NONBLOCK, 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' && !(flags & O_CREAT)) return undefined;
    const p = openErrorProblem(err as NodeJS.ErrnoException);
    if (p) throw refuseState(what, file, p);
    throw err;
  }
  const st = fstatSync(fd);
  const p = stateFileProblem(st);
  if (p) {
    closeSync(fd);
    throw refuseState(what, file, p);
  }
  return { fd, st };
}

/** Read a state file without following a link; undefined when it does not exist. Refusals exit 5. */
export function readStateFile(file: string, what: string, maxBytes = 256 * 1024 * 1024): string | undefined {
  const opened = openState(file, what, O_RDONLY);
  if (!opened) return undefined;
  const { fd, st } = opened;
  try {
    if (st.size > maxBytes) throw refuseState(what, file, `is larger than ${maxBytes} bytes`);
    return readAll(fd, st.size, maxBytes).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

export interface InputFile {
  data: Buffer;
  /** Permission bits, to warn about key files others can read. */
  mode: number;
}

/**
 * Read a small input file given by the user (kubeconfig, key file, plan): it must be a regular file (links are
 * followed: ~/.kube/config often is one) no larger than `maxBytes`. Opened non-blocking, so a FIFO never hangs.
 * Bad input exits 2.
 */
export function readInputFile(file: string, what: string, maxBytes = MAX_INPUT_FILE_BYTES): InputFile {
  let fd: number;
  try {
    fd = openSync(file, O_RDONLY | O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new BadInputError(`${what} ${file} does not exist`);
    if (code === 'EISDIR') throw new BadInputError(`${what} ${file} is a directory, not a file`);
    throw new BadInputError(`cannot read ${what} ${file}: ${code ?? (err as Error).message}`);
  }
  try {
    const st = fstatSync(fd);
    if (st.isDirectory()) throw new BadInputError(`${what} ${file} is a directory, not a file`);
    if (!st.isFile()) throw new BadInputError(`${what} ${file} is not a regular file (a device, FIFO or socket)`);
    if (st.size > maxBytes) throw new BadInputError(`${what} ${file} is larger than ${maxBytes} bytes`);
    return { data: readAll(fd, st.size, maxBytes, () => new BadInputError(`${what} ${file} is larger than ${maxBytes} bytes`)), mode: st.mode & 0o777 };
  } finally {
    closeSync(fd);
  }
}

/** readInputFile as text, its errors worded `cannot read <what> <file>: <why>` (config and node mapping files). */
export function readInputText(file: string, what: string, maxBytes = MAX_INPUT_FILE_BYTES): string {
  try {
    return readInputFile(file, what, maxBytes).data.toString('utf8');
  } catch (err) {
    const why = (err as Error).message;
    throw new BadInputError(`cannot read ${what} ${file}: ${why.startsWith(`${what} ${file} `) ? why.slice(what.length + file.length + 2) : why}`);
  }
}

/** Read to the end, never more than `max` bytes (a file may grow between fstat and read). */
function readAll(fd: number, sizeHint: number, max: number, tooBig?: () => Error): Buffer {
  const chunks: Buffer[] = [];
  let total = 0;
  const buf = Buffer.alloc(Math.min(Math.max(sizeHint, 4096), 1024 * 1024));
  for (;;) {
    let n: number;
    try {
      n = readSync(fd, buf, 0, buf.length, null);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EAGAIN') break;
      throw err;
    }
    if (n === 0) break;
    total += n;
    if (total > max) throw tooBig ? tooBig() : new Error(`more than ${max} bytes`);
    chunks.push(Buffer.from(buf.subarray(0, n)));
  }
  return Buffer.concat(chunks);
}
