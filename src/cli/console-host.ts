import readline from 'node:readline';
import type { IoHost, IoMessage, ProgressUpdate } from '../io/host.js';
import { redact } from '../io/redact.js';
import { escapeControl, styler, type Styler } from './output.js';
import { ProgressBars, ProgressLog } from './progress-bars.js';

export interface ConsoleHostOptions {
  verbose: boolean;
  quiet: boolean;
  color: boolean;
  /** Structured output goes to stdout; keep stderr for humans. */
  stderr?: NodeJS.WriteStream;
  stdout?: NodeJS.WritableStream;
}

/** How many distinct message lines are remembered to print each only once (a bound on memory for huge runs). */
const REMEMBERED_LINES = 10_000;

/**
 * Renders engine messages for a person: info/warn/error lines on stderr (stdout is kept for results,
 * so `-o json | jq` works), and progress as one bar per running task on a TTY or, in a log, as lines a log can keep
 * (ProgressLog). Each message line is printed once.
 * The CLI's own output (results, previews, summary lines) goes through it too, so that everything printed is
 * redacted and has its control characters escaped.
 */
export class ConsoleIoHost implements IoHost {
  private readonly out: NodeJS.WriteStream;
  private readonly resultOut: NodeJS.WritableStream;
  private readonly s: Styler;
  private readonly tty: boolean;
  private readonly bars?: ProgressBars;
  private readonly log?: ProgressLog;
  private readonly printed = new Set<string>();
  private readonly heldCodes = new Set<string>();
  private held: IoMessage[] = [];

  constructor(private readonly opts: ConsoleHostOptions) {
    this.out = opts.stderr ?? process.stderr;
    this.resultOut = opts.stdout ?? process.stdout;
    this.tty = !!this.out.isTTY;
    this.s = styler(opts.color && this.tty);
    if (this.tty)
      this.bars = new ProgressBars(this.out, (u) => ({ label: escapeControl(u.label), status: u.status ? this.s.dim(escapeControl(u.status)) : undefined }));
    else this.log = new ProgressLog((line) => this.out.write(`${line}\n`));
  }

  /**
   * Messages of these codes are not printed as they come: the command's result lists them (restore's notes,
   * summarized). What is still held when the host closes (the command failed before its result) is printed then.
   */
  hold(codes: readonly string[]): void {
    for (const c of codes) this.heldCodes.add(c);
  }

  /** The result has said what the held messages said: forget them. */
  dropHeld(): void {
    this.held = [];
  }

  notify(msg: IoMessage): void {
    if (msg.level === 'debug' && !this.opts.verbose) return;
    if (msg.level === 'info' && this.opts.quiet) return;
    if (msg.level === 'result') return;
    if (this.heldCodes.has(msg.code)) {
      this.held.push(msg);
      return;
    }
    this.print(msg);
  }

  private print(msg: IoMessage): void {
    const text = escapeControl(redact(msg.message));
    const prefix =
      msg.level === 'warn' ? this.s.yellow('warning: ') : msg.level === 'error' ? this.s.red('error: ') : msg.level === 'debug' ? this.s.dim('debug: ') : '';
    const line = `${prefix}${text}`;
    // The same warning from two places (a retry loop, planning and writing) is one fact: one line.
    if (this.printed.has(line)) return;
    if (this.printed.size < REMEMBERED_LINES) this.printed.add(line);
    this.writeHuman(`${line}\n`);
  }

  /** A text of the CLI's own for a person (a preview before a question, a summary line): on stderr, even with -q. */
  text(text: string): void {
    this.writeHuman(`${escapeControl(redact(text), { multiline: true })}\n`);
  }

  /** A command's result on stdout, the stream `-o json|yaml` and pipes read. */
  result(text: string): void {
    this.resultOut.write(`${escapeControl(redact(text), { multiline: true })}\n`);
  }

  progress(u: ProgressUpdate): void {
    if (this.opts.quiet) return;
    const pct = u.total ? ` ${Math.floor((100 * u.current) / Math.max(1, u.total))}%` : '';
    const count = u.total ? ` ${u.current}/${u.total}` : u.current ? ` ${u.current}` : '';
    const line = `${escapeControl(u.label)}${count}${pct}${u.status ? ` ${this.s.dim(escapeControl(u.status))}` : ''}`;
    if (this.bars) this.bars.update(u, line);
    else this.log!.update(u, escapeControl(u.label), u.status ? escapeControl(u.status) : undefined);
  }

  async confirm(question: string): Promise<boolean> {
    if (!process.stdin.isTTY) return false;
    this.bars?.stop();
    const rl = readline.createInterface({ input: process.stdin, output: this.out });
    try {
      const answer: string = await new Promise((resolve) => rl.question(`${question} [y/N] `, resolve));
      return /^y(es)?$/i.test(answer.trim());
    } finally {
      rl.close();
    }
  }

  /** Stop drawing progress (bars removed, cursor shown) and print what is still held: before an error line, or the end. */
  close(): void {
    this.bars?.stop();
    const held = this.held;
    this.held = [];
    for (const m of held) this.print(m);
  }

  /** A line for a person on stderr: above the progress bars while they are drawn. */
  private writeHuman(text: string): void {
    if (this.bars) this.bars.log(text);
    else this.out.write(text);
  }
}
