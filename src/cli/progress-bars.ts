/**
 * Progress on a terminal as one bar per running task (cli-progress's MultiBar): a backup of 40 nodes shows the
 * nodes in flight together, each with its own count and status, instead of one line overwritten by whichever
 * node reported last. A finished task leaves its final line above the bars; messages are printed above them too.
 */
import { createRequire } from 'node:module';
import type cliProgress from 'cli-progress';
import type { ProgressUpdate } from '../io/host.js';

/**
 * cli-progress (20 module files) is loaded when the first bar is drawn, not by every command that might draw one:
 * without a terminal, or for a command that reports no progress, it is never needed (docs/BENCHMARKS.md, start-up).
 */
const loadCliProgress = (): typeof cliProgress => createRequire(import.meta.url)('cli-progress') as typeof cliProgress;

export interface BarText {
  label: string;
  status?: string;
}

export class ProgressBars {
  private multi?: cliProgress.MultiBar;
  private readonly bars = new Map<string, cliProgress.SingleBar>();

  /** `render` turns a task's label and status (already escaped and styled) into the text beside its bar. */
  constructor(
    private readonly out: NodeJS.WriteStream,
    private readonly render: (u: ProgressUpdate) => BarText,
  ) {}

  get active(): boolean {
    return this.bars.size > 0;
  }

  update(u: ProgressUpdate, finalLine: string): void {
    const bar = this.bars.get(u.id);
    if (u.done) {
      if (bar) {
        this.multi!.remove(bar);
        this.bars.delete(u.id);
      }
      this.log(`${finalLine}\n`);
      if (!this.bars.size) this.stop();
      return;
    }
    const payload = this.render(u);
    if (bar) {
      if (u.total !== undefined) bar.setTotal(u.total);
      bar.update(u.current, payload);
      return;
    }
    this.multi ??= new (loadCliProgress().MultiBar)({
      stream: this.out,
      format: (options, params, p) => formatBar(options, params, p as BarText & { hasTotal: boolean }),
      hideCursor: true,
      clearOnComplete: true,
      gracefulExit: false,
      autopadding: true,
      barsize: 24,
      fps: 8,
    });
    this.bars.set(u.id, this.multi.create(u.total ?? 0, u.current, { ...payload, hasTotal: u.total !== undefined }));
  }

  /** Print a line above the bars (or straight away when no bar is shown). `text` ends with a newline. */
  log(text: string): void {
    if (this.multi && this.bars.size) this.multi.log(text);
    else this.out.write(text);
  }

  /** Remove the bars and give the terminal back (cursor shown, timers stopped); idempotent. */
  stop(): void {
    if (!this.multi) return;
    // MultiBar.stop() drops lines still waiting for the next redraw: draw once more so they are printed.
    this.multi.update();
    this.multi.stop();
    this.multi = undefined;
    this.bars.clear();
  }
}

function formatBar(options: cliProgress.Options, params: cliProgress.Params, p: BarText & { hasTotal: boolean }): string {
  const status = p.status ? ` ${p.status}` : '';
  if (!p.hasTotal) return `${p.label} ${params.value}${status}`;
  const width = options.barsize ?? 24;
  const done = Math.round(Math.min(1, Math.max(0, params.progress)) * width);
  const bar = '█'.repeat(done) + '░'.repeat(width - done);
  return `${p.label} ${bar} ${params.value}/${params.total} ${Math.floor(params.progress * 100)}%${status}`;
}

/**
 * Progress where no terminal reads it (a CI log, `| tee`, a file): lines a log can keep, never a bar's redraws.
 * A task the engine also reports as messages (`echoed`: an apply step) is left out: its "0/1 running" and "1/1 done"
 * would say the same thing a second time. Any other task prints, one unit or many (a one-pod drain's "drained"). A counted task prints how
 * far it is at most every `everyMs` (nothing at 0) and its last count once, when it is done.
 */
export class ProgressLog {
  private readonly lastPrinted = new Map<string, number>();
  private readonly firstSeen = new Map<string, number>();

  constructor(
    private readonly write: (line: string) => void,
    private readonly everyMs = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** `label` and `status` come escaped (and styled) by the host. */
  update(u: ProgressUpdate, label: string, status?: string): void {
    if (u.echoed) return;
    const t = this.now();
    if (!this.firstSeen.has(u.id)) this.firstSeen.set(u.id, t);
    // A task that ends within `everyMs` of its start prints only its result.
    const since = this.lastPrinted.get(u.id) ?? this.firstSeen.get(u.id)!;
    if (!u.done && (u.current === 0 || t - since < this.everyMs)) return;
    this.lastPrinted.set(u.id, t);
    const count = u.total !== undefined ? `${u.current} of ${u.total}` : `${u.current}`;
    this.write(`${label}: ${count}${status ? `, ${status}` : u.done ? ', done' : ''}`);
    if (u.done) {
      this.lastPrinted.delete(u.id);
      this.firstSeen.delete(u.id);
    }
  }
}
