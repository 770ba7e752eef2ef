/**
 * The engine never prints. It sends messages to an IoHost, which the CLI renders
 * (tables, progress bars, JSON) and tests record. Modelled on the CDK toolkit's I/O host:
 * every message carries a stable code so hosts and tests can react to specific events.
 */
import type { CodeOf, Level, MessageCode, ExternalCode, PayloadOf } from './messages.js';

export type { Level } from './messages.js';

export interface IoMessage<T = unknown> {
  /** Stable code from the catalogue (src/io/messages.ts), e.g. `CNR_EXPORT_DONE`, or a third party's `CNR_EXT_*`. */
  code: MessageCode | ExternalCode;
  level: Level;
  /** Human text, already free of secrets. */
  message: string;
  /** Structured payload for renderers and tests. */
  data?: T;
  time: Date;
}

export interface ProgressUpdate {
  /** A task id; one bar or line per id (a node, a kind, a step). */
  id: string;
  label: string;
  current: number;
  total?: number;
  status?: string;
  done?: boolean;
  /** The engine reports this task's start and result as messages too (an apply step): a log leaves its counts out. */
  echoed?: boolean;
}

export interface IoHost {
  notify(msg: IoMessage): void;
  progress?(update: ProgressUpdate): void;
  /** Ask a yes/no question. Hosts that cannot ask (no TTY) must return false. */
  confirm?(question: string): Promise<boolean>;
}

/**
 * Convenience wrapper the engine modules use. Each method takes only the catalogue's codes of its level and
 * their payload type (src/io/messages.ts), so an unknown code or a wrong payload does not compile.
 */
export class Reporter {
  constructor(private readonly host: IoHost) {}

  debug<C extends CodeOf<'debug'>>(code: C, message: string, data?: PayloadOf<C>): void {
    this.emit('debug', code, message, data);
  }
  info<C extends CodeOf<'info'>>(code: C, message: string, data?: PayloadOf<C>): void {
    this.emit('info', code, message, data);
  }
  warn<C extends CodeOf<'warn'>>(code: C, message: string, data?: PayloadOf<C>): void {
    this.emit('warn', code, message, data);
  }
  error<C extends CodeOf<'error'>>(code: C, message: string, data?: PayloadOf<C>): void {
    this.emit('error', code, message, data);
  }
  progress(update: ProgressUpdate): void {
    this.host.progress?.(update);
  }
  async confirm(question: string): Promise<boolean> {
    return this.host.confirm ? this.host.confirm(question) : false;
  }

  private emit(level: Level, code: MessageCode | ExternalCode, message: string, data?: unknown): void {
    this.host.notify({ code, level, message, data, time: new Date() });
  }
}

/** A host that keeps every message: for tests and for `-o json` collection. */
export class RecordingIoHost implements IoHost {
  readonly messages: IoMessage[] = [];
  readonly updates: ProgressUpdate[] = [];
  constructor(private readonly answer = false) {}
  notify(msg: IoMessage): void {
    this.messages.push(msg);
  }
  progress(update: ProgressUpdate): void {
    this.updates.push(update);
  }
  async confirm(): Promise<boolean> {
    return this.answer;
  }
  codes(): string[] {
    return this.messages.map((m) => m.code);
  }
}

export const silentHost: IoHost = { notify() {} };
