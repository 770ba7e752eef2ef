import { execFile } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { RecordingIoHost, Reporter } from '../io/host.js';
import { packageRoot } from '../core/package-root.js';
import { runSteps } from './executor.js';
import { syntheticSteps } from '../../test/support/executor-steps.js';
import { Journal, journalPathFor } from './journal.js';
import { KILL_AFTER_STEP_ENV } from '../../test/support/kill-after-step.js';

/** A child process that runs the synthetic steps with the built executor (dist/), optionally killed after a step (the harness's hook). */
function runChild(dir: string, killAfter?: number): Promise<{ code: number | null; signal: string | null }> {
  const root = packageRoot();
  const script = path.join(dir, 'child.mjs');
  writeFileSync(
    script,
    `import path from 'node:path';
const { syntheticSteps } = await import(${JSON.stringify(path.join(root, 'dist/test/support/executor-steps.js'))});
await import(${JSON.stringify(path.join(root, 'dist/test/support/kill-after-step.js'))});
const { runSteps } = await import(${JSON.stringify(path.join(root, 'dist/src/apply/executor.js'))});
const { Journal } = await import(${JSON.stringify(path.join(root, 'dist/src/apply/journal.js'))});
const { Reporter, silentHost } = await import(${JSON.stringify(path.join(root, 'dist/src/io/host.js'))});
const dir = ${JSON.stringify(dir)};
const r = await runSteps(syntheticSteps(dir), Journal.open(path.join(dir, 'journal')), { reporter: new Reporter(silentHost) });
process.exit(r.ok ? 0 : 3);
`,
  );
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [script], { env: { ...process.env, [KILL_AFTER_STEP_ENV]: killAfter ? String(killAfter) : '' } }, () => undefined);
    child.on('exit', (code, signal) => resolve({ code, signal }));
  });
}

const tmp = () => mkdtempSync(path.join(os.tmpdir(), 'cnr-exec-'));

describe('executor with a journal', () => {
  it('runs every step once and records start/end durably', async () => {
    const dir = tmp();
    writeFileSync(path.join(dir, 'replicas'), '2');
    const host = new RecordingIoHost();
    const r = await runSteps(syntheticSteps(dir), Journal.open(path.join(dir, 'journal')), { reporter: new Reporter(host) });
    expect(r.ok).toBe(true);
    expect(r.steps.map((s) => s.status)).toEqual(['done', 'done', 'done', 'done']);
    expect(readFileSync(path.join(dir, 'effects'), 'utf8')).toBe('one\npause\nthree\nresume\n');
    expect(readFileSync(path.join(dir, 'replicas'), 'utf8')).toBe('2');
    const st = Journal.read(path.join(dir, 'journal'));
    expect(st.done).toBe(true);
    expect([...st.finished]).toEqual(['one', 'pause', 'three', 'resume']);
    expect(host.codes().filter((c) => c === 'CNR_STEP_DONE')).toHaveLength(4);
  });

  it('stops at a failed step and resumes from it', async () => {
    const dir = tmp();
    writeFileSync(path.join(dir, 'replicas'), '1');
    const steps = syntheticSteps(dir);
    let fail = true;
    steps.splice(2, 0, {
      id: 'flaky',
      title: 'flaky',
      run: async () => {
        if (fail) throw new Error('boom');
      },
    });
    const j = path.join(dir, 'journal');
    const r1 = await runSteps(steps, Journal.open(j), { reporter: new Reporter(new RecordingIoHost()) });
    expect(r1.ok).toBe(false);
    expect(r1.failed).toMatchObject({ step: 'flaky', error: 'boom' });
    expect(r1.steps.map((s) => s.status)).toEqual(['done', 'done', 'failed', 'not-run', 'not-run']);
    fail = false;
    const r2 = await runSteps(steps, Journal.open(j), { reporter: new Reporter(new RecordingIoHost()) });
    expect(r2.steps.map((s) => s.status)).toEqual(['skipped', 'skipped', 'done', 'done', 'done']);
    expect(readFileSync(path.join(dir, 'replicas'), 'utf8')).toBe('1');
  });

  it('stops before the next step when the safe-point check throws; the journal names that step and resume starts there', async () => {
    const dir = tmp();
    writeFileSync(path.join(dir, 'replicas'), '3');
    const j = path.join(dir, 'journal');
    let checks = 0;
    const beforeStep = async () => {
      if (++checks === 3) throw new Error('the apply lock was lost');
    };
    const r1 = await runSteps(syntheticSteps(dir), Journal.open(j), { reporter: new Reporter(new RecordingIoHost()), beforeStep });
    expect(r1.ok).toBe(false);
    expect(r1.failed).toMatchObject({ step: 'three', error: 'the apply lock was lost' });
    expect(r1.steps.map((s) => s.status)).toEqual(['done', 'done', 'not-run', 'not-run']);
    expect(readFileSync(path.join(dir, 'effects'), 'utf8')).toBe('one\npause\n');
    const st = Journal.read(j);
    expect(st.records.at(-1)).toMatchObject({ event: 'stopped', step: 'three', index: 3, reason: 'the apply lock was lost' });
    expect(st.unfinished).toEqual([]);
    const r2 = await runSteps(syntheticSteps(dir), Journal.open(j), { reporter: new Reporter(new RecordingIoHost()), beforeStep: async () => undefined });
    expect(r2.steps.map((s) => s.status)).toEqual(['skipped', 'skipped', 'done', 'done']);
    expect(readFileSync(path.join(dir, 'replicas'), 'utf8')).toBe('3');
  });

  it('ignores a torn last line (a process killed mid-append)', () => {
    const dir = tmp();
    const j = path.join(dir, 'journal');
    const journal = Journal.open(j);
    journal.append({ event: 'step-start', step: 'a', index: 1 });
    journal.append({ event: 'step-end', step: 'a', index: 1 });
    appendFileSync(j, '{"event":"step-start","st');
    const st = Journal.read(j);
    expect([...st.finished]).toEqual(['a']);
    expect(st.unfinished).toEqual([]);
  });

  it('places the journal next to the bundle', () => {
    expect(journalPathFor('/b/backups/c1-20260101T000000Z/', 'plan-x')).toBe('/b/backups/c1-20260101T000000Z.plan-x.journal');
    expect(journalPathFor('/b/c1.tar.gz', 'p')).toBe('/b/c1.tar.gz.p.journal');
  });

  it('after SIGKILL at each step boundary in turn, resume ends like an uninterrupted run and does nothing twice', async () => {
    expect(existsSync(path.join(packageRoot(), 'dist/src/apply/executor.js')), 'build first: npx tsc -p .').toBe(true);
    const dir = tmp();
    writeFileSync(path.join(dir, 'replicas'), '3');
    for (let n = 1; n <= 3; n++) {
      const r = await runChild(dir, n);
      expect(r.signal, `run killed after step ${n}`).toBe('SIGKILL');
      const st = Journal.read(path.join(dir, 'journal'));
      expect(st.finished.size).toBe(n);
    }
    const last = await runChild(dir);
    expect(last.code).toBe(0);
    // Every effect exactly once, and the replica count remembered before scaling to 0 was put back.
    expect(readFileSync(path.join(dir, 'effects'), 'utf8')).toBe('one\npause\nthree\nresume\n');
    expect(readFileSync(path.join(dir, 'replicas'), 'utf8')).toBe('3');
    const st = Journal.read(path.join(dir, 'journal'));
    expect(st.done).toBe(true);
    expect(st.records.filter((r) => r.event === 'begin')).toHaveLength(0); // the CLI writes begin records, not runSteps
  });
});
