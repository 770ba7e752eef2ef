import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeTempDir, sweepStaleTempDirs } from './temp-dir.js';

const tmps: string[] = [];
afterEach(() => {
  for (const t of tmps.splice(0)) rmSync(t, { recursive: true, force: true });
});
const tmp = () => {
  const t = mkdtempSync(path.join(os.tmpdir(), 'cnr-temp-dir-'));
  tmps.push(t);
  return t;
};
/** The pid of a process that has exited (its number not reused this soon). */
const deadPid = () => spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout.trim();

describe('temporary directories a killed run leaves', () => {
  it('makeTempDir removes the directories of the prefix whose process is gone, and keeps live ones and other names', () => {
    const t = tmp();
    const stale = path.join(t, `cni-rewind-s3-out-${deadPid()}-AbC123`);
    mkdirSync(stale);
    writeFileSync(path.join(stale, 'bundle.tar.gz'), 'x');
    const live = path.join(t, `cni-rewind-s3-out-${process.ppid}-XyZ789`);
    mkdirSync(live);
    const other = path.join(t, `cni-rewind-bundle-${deadPid()}-AbC123`);
    mkdirSync(other);
    const made = makeTempDir('cni-rewind-s3-out-', t);
    expect(existsSync(stale)).toBe(false);
    expect(existsSync(live)).toBe(true);
    expect(existsSync(other)).toBe(true);
    expect(path.basename(made)).toMatch(new RegExp(`^cni-rewind-s3-out-${process.pid}-[A-Za-z0-9]{6}$`));
    expect(statSync(made).mode & 0o777).toBe(0o700);
  });

  it('never removes its own process directory or a name that only starts like one', () => {
    const t = tmp();
    const own = path.join(t, `cnr-x-${process.pid}-AbC123`);
    const longer = path.join(t, `cnr-x-${deadPid()}-AbC123-extra`);
    mkdirSync(own);
    mkdirSync(longer);
    expect(sweepStaleTempDirs('cnr-x-', t)).toEqual([]);
    expect(existsSync(own) && existsSync(longer)).toBe(true);
  });
});
