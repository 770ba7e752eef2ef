/**
 * vcsim (govmomi's vCenter simulator) for the tests: built once by test/vcsim/build.sh (cached outside the
 * repository), started on 127.0.0.1 only, stopped by its PID. Plain HTTP by default; the provider's TLS
 * options are covered by the Proxmox tests.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { packageRoot } from '../../src/core/package-root.js';

const run = promisify(execFile);

export interface VcsimHandle {
  /** http://127.0.0.1:PORT/sdk, without credentials. */
  url: string;
  username: string;
  password: string;
  pid: number;
  stop(): Promise<void>;
}

export async function buildVcsim(): Promise<string> {
  const { stdout } = await run('bash', [path.join(packageRoot(), 'test', 'vcsim', 'build.sh')], { timeout: 20 * 60_000, maxBuffer: 16 * 1024 * 1024 });
  const bin = stdout.trim().split('\n').pop();
  if (!bin) throw new Error('vcsim build.sh printed no binary path');
  return bin;
}

export async function startVcsim(opts: { port: number; username?: string; password?: string }): Promise<VcsimHandle> {
  const bin = await buildVcsim();
  const username = opts.username ?? 'cnr-test-user';
  const password = opts.password ?? 'cnr-test-Pa55word';
  const child: ChildProcess = spawn(bin, ['-l', `127.0.0.1:${opts.port}`, '-username', username, '-password', password], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`vcsim did not start within 30 s: ${stderr.slice(-500)}`)), 30_000);
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /VCSIM_URL=(\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        const u = new URL(m[1]!);
        u.username = '';
        u.password = '';
        resolve(u.toString());
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`vcsim exited with ${code}: ${stderr.slice(-500)}`));
    });
  });
  return {
    url,
    username,
    password,
    pid: child.pid!,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
