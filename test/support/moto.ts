/**
 * The moto server (a real AWS EC2 emulator, `python3 -m moto.server`) on 127.0.0.1 for tests and benchmarks:
 * started on a free port, ready when GET /moto-api/ answers 200, reset with POST /moto-api/reset, killed by PID.
 * test/requirements.txt pins moto[server] for CI. A missing moto makes start() throw: tests fail loudly.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';

export interface Moto {
  url: string;
  port: number;
  pid: number;
  /** Env for the AWS SDK (standard variables only, as a user would set them). */
  env: Record<string, string>;
  reset(): Promise<void>;
  stop(): Promise<void>;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export async function startMoto(opts: { timeoutMs?: number } = {}): Promise<Moto> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  let log = '';
  const child: ChildProcess = spawn('python3', ['-m', 'moto.server', '-H', '127.0.0.1', '-p', String(port)], { stdio: ['ignore', 'pipe', 'pipe'] });
  const keep = (b: Buffer) => {
    log = (log + b.toString()).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  let exited: number | null | undefined;
  child.on('exit', (code) => (exited = code));
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  for (;;) {
    if (exited !== undefined) throw new Error(`moto server exited (code ${exited}) before it was ready; is moto[server] installed (pip install -r test/requirements.txt)?\n${log}`);
    try {
      const r = await fetch(`${url}/moto-api/`);
      if (r.status === 200) break;
    } catch {
      /* not listening yet */
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`moto server did not answer on ${url} within ${opts.timeoutMs ?? 60_000} ms\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  const pid = child.pid!;
  return {
    url,
    port,
    pid,
    env: { AWS_ACCESS_KEY_ID: 'testing', AWS_SECRET_ACCESS_KEY: 'testing', AWS_REGION: 'us-east-1', AWS_ENDPOINT_URL_EC2: url, AWS_EC2_METADATA_DISABLED: 'true' },
    async reset() {
      const r = await fetch(`${url}/moto-api/reset`, { method: 'POST' });
      if (r.status !== 200) throw new Error(`moto reset answered HTTP ${r.status}`);
    },
    async stop() {
      if (exited !== undefined) return;
      const gone = new Promise<void>((r) => child.once('exit', () => r()));
      process.kill(pid, 'SIGTERM');
      const t = setTimeout(() => exited === undefined && process.kill(pid, 'SIGKILL'), 5000);
      await gone;
      clearTimeout(t);
    },
  };
}
