/**
 * Issue 30 asks the path matrix test to write its table into docs/calico-differences.md. Each path appends its row
 * to `path-matrix.tsv` in the e2e cache (path-matrix-support.ts); once the whole run is over, the main process
 * (global-setup.ts) writes this run's rows between the markers of that document, over the rows of the same paths
 * (a run of one file keeps the others' rows). One writer, after every worker: four files run side by side, and none
 * of them rewrites a file another is writing.
 */
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const MATRIX_BEGIN = '<!-- path-matrix:begin (written by the e2e run, test/support/path-matrix-docs.ts) -->';
export const MATRIX_END = '<!-- path-matrix:end -->';
const HEADER = [
  '| path | run (cores) | strategy | result | s (all) | s (until applied) | operator error lines (all; none once settled) |',
  '|---|---|---|---|---|---|---|',
];

const versionKey = (v: string) =>
  v
    .split('.')
    .map((n) => n.padStart(3, '0'))
    .join('.');
const pathKey = (p: string) => p.split(' -> ').map(versionKey).join(' ');
const escape = (s: string) => s.replace(/\|/g, '\\|');

/** This run's rows of the TSV (written since `sinceIso`; the newest per path), as table lines keyed by path. */
export function runRows(tsv: string, sinceIso: string, cores = os.cpus().length): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of tsv.split('\n')) {
    const [at = '', ...cells] = line.split('\t');
    if (cells.length !== 6 || !/ -> /.test(cells[0]!) || at < sinceIso) continue;
    const [p, ...rest] = cells.map(escape);
    out.set(cells[0]!, `| ${p} | ${at.slice(0, 10)} (${cores}) | ${rest.join(' | ')} |`);
  }
  return out;
}

/** `doc` with `rows` written between the markers over the rows of the same paths; undefined without markers. */
export function withMatrixRows(doc: string, rows: Map<string, string>): string | undefined {
  const begin = doc.indexOf(MATRIX_BEGIN);
  const end = doc.indexOf(MATRIX_END);
  if (begin < 0 || end < begin) return undefined;
  const all = new Map<string, string>();
  for (const line of doc.slice(begin + MATRIX_BEGIN.length, end).split('\n')) {
    const m = /^\| (\S+ -> \S+) \|/.exec(line);
    if (m) all.set(m[1]!, line);
  }
  for (const [p, line] of rows) all.set(p, line);
  const sorted = [...all.entries()].sort(([a], [b]) => pathKey(a).localeCompare(pathKey(b))).map(([, line]) => line);
  return `${doc.slice(0, begin + MATRIX_BEGIN.length)}\n${[...HEADER, ...sorted].join('\n')}\n${doc.slice(end)}`;
}

/** Writes this run's rows into the document (atomically), if the run had any. Returns what it did, for the log. */
export function writeMatrixDocs(tsvFile: string, docFile: string, sinceIso: string): string | undefined {
  if (!existsSync(tsvFile)) return undefined;
  const rows = runRows(readFileSync(tsvFile, 'utf8'), sinceIso);
  if (!rows.size) return undefined;
  const doc = withMatrixRows(readFileSync(docFile, 'utf8'), rows);
  if (!doc) return `path matrix: no markers in ${docFile}; table not written`;
  const tmp = `${docFile}.${process.pid}.tmp`;
  writeFileSync(tmp, doc);
  renameSync(tmp, docFile);
  return `path matrix: ${rows.size} row(s) written into ${path.relative(process.cwd(), docFile)}`;
}
