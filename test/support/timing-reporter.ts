/**
 * Ends every run with what it cost: each test file's wall time and test count, slowest first (e2e and unit), and
 * the builds this run waited for (what, how long; from control-plane/build*.sh). It also records the files' times
 * on this machine for the duration sequencer. Failed tests come last, each with the head of its error: CI keeps only
 * the tail of a run's output, and a failure's message is what it needs from it.
 */
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Reporter, TestModule, Vitest } from 'vitest/node';
import { buildCacheRoot, buildsSince, knownDurations, measuredDurationsFile, prereqsStartedAt } from './test-timings.js';

interface Row {
  file: string;
  project: string;
  tests: number;
  failed: number;
  skipped: number;
  setupMs: number;
  wallMs: number;
}

const secs = (ms: number) => (ms / 1000).toFixed(1);

export default class TimingReporter implements Reporter {
  private startedAt = Date.now();
  private root = process.cwd();

  onInit(vitest: Vitest): void {
    this.startedAt = Date.now();
    this.root = vitest.config.root;
  }

  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const rows = modules.map((m) => this.row(m)).sort((a, b) => b.wallMs - a.wallMs);
    const lines = ['', `== test files by wall time (run: ${secs(Date.now() - this.startedAt)} s, ${rows.length} files)`];
    lines.push(`${'wall s'.padStart(8)} ${'setup s'.padStart(8)} ${'tests'.padStart(6)} ${'failed'.padStart(6)}  project  file`);
    for (const r of rows) {
      lines.push(
        `${secs(r.wallMs).padStart(8)} ${secs(r.setupMs).padStart(8)} ${String(r.tests).padStart(6)} ${String(r.failed).padStart(6)}  ${r.project.padEnd(7)}  ${r.file}`,
      );
    }
    const since = prereqsStartedAt();
    const builds = since !== undefined && since <= this.startedAt ? buildsSince(since) : buildsSince(this.startedAt);
    const total = builds.reduce((n, b) => n + b.seconds, 0);
    lines.push(`== builds this run: ${builds.length ? `${builds.length}, ${total} s in all` : 'none (everything was cached)'}`);
    for (const b of builds) lines.push(`${String(b.seconds).padStart(8)} s  ${b.what}`);
    lines.push(...failureLines(modules, this.root));
    console.log(lines.join('\n'));
    this.record(rows);
  }

  private row(m: TestModule): Row {
    const d = m.diagnostic();
    let tests = 0;
    let failed = 0;
    let skipped = 0;
    for (const t of m.children.allTests()) {
      tests++;
      const state = t.result().state;
      if (state === 'failed') failed++;
      if (state === 'skipped') skipped++;
    }
    return {
      file: path.relative(this.root, m.moduleId),
      project: m.project.name,
      tests,
      failed,
      skipped,
      setupMs: d.setupDuration,
      wallMs: d.prepareDuration + d.environmentSetupDuration + d.setupDuration + d.collectDuration + d.duration,
    };
  }

  /** Files that ran to the end keep their new time; others keep the last one known. */
  private record(rows: Row[]): void {
    const table = Object.fromEntries(knownDurations(this.root));
    for (const r of rows) if (r.tests > 0 && r.skipped < r.tests) table[r.file] = Math.round(r.wallMs);
    try {
      mkdirSync(buildCacheRoot(), { recursive: true });
      const tmp = `${measuredDurationsFile()}.${process.pid}.tmp`;
      writeFileSync(tmp, JSON.stringify(table, Object.keys(table).sort(), 1) + '\n');
      renameSync(tmp, measuredDurationsFile());
    } catch {
      // the ordering of the next run is all that is lost
    }
  }
}

const FAILURE_LINES = 45;
const FAILURES_SHOWN = 4;

/** The failed tests of a run, each named with its file and the first lines of its first error. */
export function failureLines(modules: ReadonlyArray<TestModule>, root: string): string[] {
  const failed: string[][] = [];
  for (const m of modules) {
    const file = path.relative(root, m.moduleId);
    const moduleErrors = m.errors();
    if (moduleErrors.length) failed.push([`${file} (the file itself)`, ...errorHead(moduleErrors[0])]);
    for (const t of m.children.allTests()) {
      const r = t.result();
      if (r.state !== 'failed') continue;
      failed.push([`${file} > ${t.fullName}`, ...errorHead(r.errors?.[0])]);
    }
  }
  if (!failed.length) return [];
  const out = [`== failed: ${failed.length}`];
  for (const f of failed.slice(0, FAILURES_SHOWN)) out.push(`-- ${f[0]}`, ...f.slice(1).map((l) => `   ${l}`));
  if (failed.length > FAILURES_SHOWN) out.push(`-- and ${failed.length - FAILURES_SHOWN} more (above)`);
  return out;
}

function errorHead(error: { message?: string; stack?: string } | undefined): string[] {
  if (!error) return ['(no error recorded)'];
  const text = error.stack || error.message || String(error);
  // The runner's own frames say nothing about the failure.
  return text
    .split('\n')
    .filter((l) => !/^\s+at .*(node_modules|node:internal|new Promise)/.test(l))
    .slice(0, FAILURE_LINES);
}
