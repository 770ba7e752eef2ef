/**
 * The apply journal: one JSON record per line, each appended with a single write and fsync'd before the
 * executor moves on, so after a crash, kill -9 or Ctrl-C the file says exactly which steps finished.
 * A torn last line (the process died mid-write) is ignored when reading.
 */
import { closeSync, existsSync, fsyncSync, openSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openStateFileForAppend, readStateFile } from '../io/safe-file.js';

export type JournalRecord =
  | { event: 'begin'; time: string; planId: string; pid: number; host: string; resume: boolean }
  | { event: 'step-start'; time: string; step: string; index: number }
  | { event: 'step-end'; time: string; step: string; index: number; summary?: string }
  | { event: 'step-failed'; time: string; step: string; index: number; error: string }
  | { event: 'remember'; time: string; key: string; value: unknown }
  | { event: 'interrupted'; time: string; signal: string }
  /** The run stopped before starting `step` (e.g. its apply lock was lost); --resume starts there. */
  | { event: 'stopped'; time: string; step: string; index: number; reason: string }
  | { event: 'done'; time: string };

/** A record as callers write it: the time is added on append. */
export type NewRecord = JournalRecord extends infer R ? (R extends { time: string } ? Omit<R, 'time'> : never) : never;

export interface JournalState {
  records: JournalRecord[];
  /** Step ids whose end is recorded. */
  finished: Set<string>;
  /** Steps started but not finished (at most one unless a run failed and another resumed). */
  unfinished: string[];
  remembered: Record<string, unknown>;
  done: boolean;
  lastFailure?: { step: string; error: string };
}

/** Journal path for a plan: a sibling of the bundle it relies on (a directory or a .tar.gz). */
export function journalPathFor(bundlePath: string, planId: string): string {
  const abs = path.resolve(bundlePath).replace(/\/+$/, '');
  return path.join(path.dirname(abs), `${path.basename(abs)}.${planId}.journal`);
}

export class Journal {
  private state: JournalState;

  private constructor(readonly path: string) {
    this.state = Journal.read(path);
  }

  static open(p: string): Journal {
    return new Journal(p);
  }

  static exists(p: string): boolean {
    return existsSync(p);
  }

  /**
   * Parse a journal file; a missing file is an empty journal. A link, a directory or someone else's file is
   * refused (exit 5): the journal is appended to, so a planted link would make apply write anywhere.
   */
  static read(p: string): JournalState {
    // remembered has no prototype: a journal's keys ("__proto__") are data, never object machinery.
    const st: JournalState = { records: [], finished: new Set(), unfinished: [], remembered: Object.create(null) as Record<string, unknown>, done: false };
    const text = readStateFile(p, 'apply journal');
    if (text === undefined) return st;
    const lines = text.split('\n');
    for (const line of lines) {
      if (!line.trim()) continue;
      let rec: JournalRecord;
      try {
        rec = JSON.parse(line);
      } catch {
        continue; // a torn final line from a process killed mid-append
      }
      if (!rec || typeof rec !== 'object' || typeof (rec as { event?: unknown }).event !== 'string') continue;
      Journal.fold(st, rec);
    }
    return st;
  }

  private static fold(st: JournalState, rec: JournalRecord): void {
    st.records.push(rec);
    switch (rec.event) {
      case 'step-start':
        if (!st.unfinished.includes(rec.step) && !st.finished.has(rec.step)) st.unfinished.push(rec.step);
        break;
      case 'step-end':
        st.finished.add(rec.step);
        st.unfinished = st.unfinished.filter((s) => s !== rec.step);
        break;
      case 'step-failed':
        st.lastFailure = { step: rec.step, error: rec.error };
        break;
      case 'remember':
        st.remembered[rec.key] = rec.value;
        break;
      case 'done':
        st.done = true;
        break;
    }
  }

  get current(): JournalState {
    return this.state;
  }

  get started(): boolean {
    return this.state.records.some((r) => r.event === 'step-start');
  }

  /** Append one record durably: a single write on an O_APPEND descriptor, then fsync. */
  append(rec: NewRecord): void {
    const full = { time: new Date().toISOString(), ...rec } as JournalRecord;
    const isNew = !existsSync(this.path);
    const fd = openStateFileForAppend(this.path, 'apply journal');
    try {
      writeSync(fd, JSON.stringify(full) + '\n');
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    if (isNew) fsyncDir(path.dirname(this.path));
    Journal.fold(this.state, full);
  }

  begin(planId: string, resume: boolean): void {
    this.append({ event: 'begin', planId, pid: process.pid, host: os.hostname(), resume });
  }
}

function fsyncDir(dir: string): void {
  try {
    const fd = openSync(dir, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    /* some filesystems do not allow fsync on directories; the file itself is synced */
  }
}
