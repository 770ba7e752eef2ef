import { spawn, type ChildProcess } from 'node:child_process';
import { openSync } from 'node:fs';
import path from 'node:path';

/** A program a Slot runs, under the key it was started for. */
export interface Running {
  key: string;
  child: ChildProcess;
  startedAt: string;
  exited?: number | string;
}

/** One program the supervisor runs as a kubelet runs a container: started by key, restarted when it crashes. */
export class Slot {
  running?: Running;
  private lastStart = 0;
  /** The key last started and how often in a row (a crash and restart counts again; another key starts at 1). */
  starts = { key: '', n: 0 };
  error?: string;
  constructor(
    readonly name: string,
    private readonly workDir: string,
    private readonly log: (l: string) => void,
    /** A crashed program is started again at most this often (a crash loop must not spin the supervisor). */
    private readonly restartEveryMs = 5000,
  ) {}

  alive(): boolean {
    return !!this.running && this.running.exited === undefined;
  }

  /** Start `bin args` under `key` unless it already runs; a crashed process is restarted at most every `restartEveryMs`. */
  ensure(key: string, bin: string, args: string[], env: Record<string, string>): void {
    if (this.running && this.running.key === key && this.alive()) return;
    if (this.running && this.running.key !== key) return; // stop() first
    if (Date.now() - this.lastStart < this.restartEveryMs) return;
    this.lastStart = Date.now();
    const out = openSync(path.join(this.workDir, `${this.name}.log`), 'a');
    const child = spawn(bin, args, { stdio: ['ignore', out, out], env: { ...process.env, ...env } });
    const r: Running = { key, child, startedAt: new Date().toISOString() };
    this.starts = { key, n: this.starts.key === key ? this.starts.n + 1 : 1 };
    child.on('exit', (code, sig) => {
      r.exited = code ?? sig ?? 'unknown';
      this.log(`${this.name} (${key}) exited: ${r.exited}`);
    });
    this.running = r;
    this.log(`${this.name}: started ${key} (pid ${child.pid})`);
  }

  async stop(): Promise<void> {
    const r = this.running;
    if (!r) return;
    this.running = undefined;
    if (r.exited !== undefined) return;
    this.log(`${this.name}: stopping ${r.key} (pid ${r.child.pid})`);
    r.child.kill('SIGTERM');
    const deadline = Date.now() + 10_000;
    while (r.exited === undefined && Date.now() < deadline) await sleep(100);
    if (r.exited === undefined) r.child.kill('SIGKILL');
    while (r.exited === undefined) await sleep(50);
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
