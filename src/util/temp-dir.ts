/**
 * Private temporary directories that a killed run does not leave behind for good. A run stopped by SIGKILL (or a
 * lost machine) cannot remove its own: an s3:// backup's local archive is the whole bundle, gigabytes on a large
 * cluster. Each directory's name carries the pid of the process that made it; making one removes the directories of
 * the same prefix whose process is gone.
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** Whether a process with this pid exists (EPERM: it exists, owned by someone else). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes `<tmp>/<prefix><pid>-*` directories of this user whose process is gone (never another user's, never one
 * of a live process); errors are ignored: the sweep is a courtesy, making the new directory is the point.
 */
export function sweepStaleTempDirs(prefix: string, tmp = os.tmpdir()): string[] {
  const removed: string[] = [];
  const uid = process.getuid?.();
  const pattern = new RegExp(`^${prefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(\\d+)-[A-Za-z0-9]{6}$`);
  let names: string[];
  try {
    names = readdirSync(tmp);
  } catch {
    return removed;
  }
  for (const name of names) {
    const pid = Number(pattern.exec(name)?.[1]);
    if (!pid || pid === process.pid || alive(pid)) continue;
    const dir = path.join(tmp, name);
    try {
      const st = statSync(dir);
      if (!st.isDirectory() || (uid !== undefined && st.uid !== uid)) continue;
      rmSync(dir, { recursive: true, force: true });
      removed.push(dir);
    } catch {
      // gone meanwhile, or not ours to remove
    }
  }
  return removed;
}

/** A new private (0700) directory `<tmp>/<prefix><pid>-XXXXXX`, after sweeping the stale ones of the prefix. */
export function makeTempDir(prefix: string, tmp = os.tmpdir()): string {
  sweepStaleTempDirs(prefix, tmp);
  return mkdtempSync(path.join(tmp, `${prefix}${process.pid}-`));
}
