import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { Reporter } from '../io/host.js';
import { ConsoleIoHost } from './console-host.js';
import { ProgressLog } from './progress-bars.js';

/** A stream that is not a terminal (a CI log, a pipe) and keeps what is written to it. */
function logStream(): NodeJS.WriteStream & { lines: () => string[] } {
  const chunks: string[] = [];
  const w = new Writable({
    write(chunk, _enc, cb) {
      chunks.push(String(chunk));
      cb();
    },
  }) as unknown as NodeJS.WriteStream & { lines: () => string[] };
  Object.assign(w, { isTTY: false, lines: () => chunks.join('').split('\n').filter(Boolean) });
  return w;
}

/** A progress bar's text, as a terminal shows it: "preflight 0/1 0% running". */
const BAR_LINE = /\d+\/\d+ \d+%/;

describe('console output in a log (no terminal)', () => {
  it('an apply step is one line when it starts and one with its result: no "0/1 0% running", no "1/1 100% done"', () => {
    const err = logStream();
    const host = new ConsoleIoHost({ verbose: false, quiet: false, color: true, stderr: err, stdout: logStream() });
    const r = new Reporter(host);
    r.info('CNR_STEP_START', '[1/2] preflight', { step: 'preflight', index: 1, rerun: false });
    r.progress({ id: 'preflight', label: 'preflight', echoed: true, current: 0, total: 1, status: 'running' });
    r.info('CNR_STEP_DONE', '[1/2] preflight: ok', { step: 'preflight', index: 1, ms: 5 });
    r.progress({ id: 'preflight', label: 'preflight', echoed: true, current: 1, total: 1, status: 'done', done: true });
    host.close();
    expect(err.lines()).toEqual(['[1/2] preflight', '[1/2] preflight: ok']);
  });

  it('prints a message once however often it is reported, and no colour codes', () => {
    const err = logStream();
    const host = new ConsoleIoHost({ verbose: false, quiet: false, color: true, stderr: err, stdout: logStream() });
    const r = new Reporter(host);
    for (let i = 0; i < 3; i++) r.warn('CNR_RESTORE_DRIFT', 'IPPool p changed after it was written');
    r.warn('CNR_RESTORE_DRIFT', 'IPPool q changed after it was written');
    host.close();
    expect(err.lines()).toEqual(['warning: IPPool p changed after it was written', 'warning: IPPool q changed after it was written']);
  });

  it('held messages are left to the result; what the result did not cover is printed when the host closes', () => {
    const err = logStream();
    const host = new ConsoleIoHost({ verbose: false, quiet: false, color: false, stderr: err, stdout: logStream() });
    const r = new Reporter(host);
    host.hold(['CNR_RESTORE_OWNER_LINKED']);
    r.info('CNR_RESTORE_OWNER_LINKED', 'ConfigMap a: linked to Installation default', { id: 'a' });
    expect(err.lines()).toEqual([]);
    host.dropHeld();
    r.info('CNR_RESTORE_OWNER_LINKED', 'ConfigMap b: linked to Installation default', { id: 'b' });
    host.close();
    expect(err.lines()).toEqual(['ConfigMap b: linked to Installation default']);
  });

  it('a counted task prints how far it is at most every 10 s and its last count once; never a bar', () => {
    let now = 0;
    const lines: string[] = [];
    const log = new ProgressLog(
      (l) => lines.push(l),
      10_000,
      () => now,
    );
    const total = 10_000;
    for (let done = 0; done <= total; done += 100) {
      now = done * 3; // 30 s in all
      log.update({ id: 'restore', label: 'restoring objects', current: done, total, done: done === total }, 'restoring objects');
    }
    expect(lines).toEqual(['restoring objects: 3400 of 10000', 'restoring objects: 6800 of 10000', 'restoring objects: 10000 of 10000, done']);
    expect(lines.filter((l) => BAR_LINE.test(l))).toEqual([]);
    // A task that ends quickly prints only its result.
    lines.length = 0;
    log.update({ id: 'export ippools', label: 'export ippools', current: 500 }, 'export ippools');
    log.update({ id: 'export ippools', label: 'export ippools', current: 640, done: true }, 'export ippools');
    expect(lines).toEqual(['export ippools: 640, done']);
  });

  it('a one-unit task the engine reports nowhere else keeps its result line (a one-pod drain\'s "drained")', () => {
    const lines: string[] = [];
    const log = new ProgressLog((l) => lines.push(l));
    log.update({ id: 'drain:n1', label: 'drain n1', current: 0, total: 1, status: 'evicting' }, 'drain n1', 'evicting');
    log.update({ id: 'drain:n1', label: 'drain n1', current: 1, total: 1, status: 'drained', done: true }, 'drain n1', 'drained');
    expect(lines).toEqual(['drain n1: 1 of 1, drained']);
  });
});
