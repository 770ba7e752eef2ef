import { spawn } from 'node:child_process';
import path from 'node:path';
import { packageRoot } from '../../core/package-root.js';
import { Slot } from './slot.js';

/** How long a bridge just started may take to listen (a node process starting on a loaded machine). */
const START_WAIT_MS = 15_000;

const script = () => path.join(packageRoot(), 'dist', 'src', 'dev', 'local-cluster', 'api-bridge.js');

/**
 * The API bridge into one kwok node's network namespace (api-bridge.ts), kept serving: the CNI plugin, run inside
 * the namespace, reaches the API server only through it, and a bridge that does not listen there fails every ADD and
 * DEL of the node with "connection refused" for as long as it is left so.
 * - Health check: a connect to 127.0.0.1:<port> made inside the namespace by its name (`ip netns exec`, as the plugin
 *   runs), so a bridge whose process lives on in a namespace that lost that name (removed and made again) fails it.
 * - `ready()` before each call: a bridge that is not running is started and waited for until it answers, so the first
 *   call after a start (a calico-node rollout) finds it listening. A running one is taken as serving: nothing is
 *   spawned on the way of an ordinary call.
 * - `recover()` after a call met "connection refused": the check, and a bridge that fails it is started again and
 *   waited for, so that the caller retries at once, as a kubelet retries a failed sandbox.
 */
export class NodeBridge {
  private readonly slot: Slot;

  constructor(
    readonly name: string,
    readonly netns: string,
    private readonly port: number,
    private readonly socket: string,
    workDir: string,
    private readonly log: (line: string) => void,
  ) {
    // Started when a call needs it, not on a timer: no throttle between a stop and the next start.
    this.slot = new Slot(name, workDir, log, 0);
  }

  get pid(): number | undefined {
    return this.slot.alive() ? this.slot.running!.child.pid : undefined;
  }

  /** Serving in the namespace (started and waited for unless it runs); false when it did not answer in time. */
  async ready(): Promise<boolean> {
    if (this.slot.alive()) return true;
    return this.restart('not running');
  }

  /** A call through the bridge met "connection refused": true once the bridge answers inside the namespace. */
  async recover(): Promise<boolean> {
    if (this.slot.alive() && (await probeInNetns(this.netns, this.port, 0))) return true;
    return this.restart(this.slot.alive() ? `not serving in ${this.netns}` : 'not running');
  }

  stop(): Promise<void> {
    return this.slot.stop();
  }

  private async restart(why: string): Promise<boolean> {
    this.log(`${this.name}: ${why}; starting it`);
    await this.slot.stop();
    this.slot.ensure(this.netns, 'ip', ['netns', 'exec', this.netns, process.execPath, script(), String(this.port), this.socket], {});
    const serving = this.slot.alive() && (await probeInNetns(this.netns, this.port, START_WAIT_MS));
    if (!serving) this.log(`${this.name}: not serving in ${this.netns} ${START_WAIT_MS / 1000} s after its start`);
    return serving;
  }
}

/** A connect to 127.0.0.1:port inside the named namespace, tried until it succeeds or `waitMs` has passed. */
export function probeInNetns(netns: string, port: number, waitMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn('ip', ['netns', 'exec', netns, process.execPath, script(), '--probe', String(port), String(waitMs)], { stdio: 'ignore' });
    const timer = setTimeout(() => child.kill('SIGKILL'), waitMs + 30_000);
    child.on('error', () => resolve(false));
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve(code === 0);
    });
  });
}

/** Whether the CNI plugin's output says the bridge at 127.0.0.1:port refused its connection. */
export function refusedByBridge(output: string, port: number): boolean {
  return output.includes(`127.0.0.1:${port}: connect: connection refused`);
}
