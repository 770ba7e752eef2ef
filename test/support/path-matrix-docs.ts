/**
 * Issue 30 asks the path matrix test to write its table into docs/calico-differences.md. Each path appends its row
 * to `path-matrix.tsv` in the e2e cache (path-matrix-support.ts); once the whole run is over, the main process
 * (global-setup.ts) writes this run's rows between the markers of that document. One writer, after every worker:
 * four files run side by side, and none of them rewrites a file another is writing.
 */
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const MATRIX_BEGIN = '<!-- path-matrix:begin (written by the e2e run, test/support/path-matrix-docs.ts) -->';
export const MATRIX_END = '<!-- path-matrix:end -->';

/** One TSV line: when, path, strategy, result, seconds in all, seconds until applied, operator error lines. */
interface Row {
  at: string;
  cells: string[];
}

function parse(tsv: string): Row[] {
  return tsv
    .split('\n')
    .map((l) => l.split('\t'))
    .filter((c) => c.length === 7 && / -> /.test(c[1]!))
    .map(([at, ...cells]) => ({ at: at!, cells }));
}

const versionKey = (v: string) =>
  v
    .split('.')
    .map((n) => n.padStart(3, '0'))
    .join('.');

/** The table of the rows written since `sinceIso` (the newest per path), in path order. Undefined when none. */
export function matrixTable(tsv: string, sinceIso: string, cores = os.cpus().length): string | undefined {
  const newest = new Map<string, Row>();
  for (const r of parse(tsv)) if (r.at >= sinceIso) newest.set(r.cells[0]!, r);
  if (!newest.size) return undefined;
  const rows = [...newest.values()].sort((a, b) => {
    const [af = '', at = ''] = a.cells[0]!.split(' -> ');
    const [bf = '', bt = ''] = b.cells[0]!.split(' -> ');
    return versionKey(af).localeCompare(versionKey(bf)) || versionKey(at).localeCompare(versionKey(bt));
  });
  const escape = (s: string) => s.replace(/\|/g, '\\|');
  return [
    `Run of ${sinceIso.slice(0, 10)} (${cores} cores, the e2e files side by side):`,
    '',
    '| path | strategy | result | s (all) | s (until applied) | operator error lines (all; none once settled) |',
    '|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${r.cells.map(escape).join(' | ')} |`),
  ].join('\n');
}

/** `doc` with the text between the markers replaced by `table`; undefined when the markers are missing. */
export function withMatrixTable(doc: string, table: string): string | undefined {
  const begin = doc.indexOf(MATRIX_BEGIN);
  const end = doc.indexOf(MATRIX_END);
  if (begin < 0 || end < begin) return undefined;
  return `${doc.slice(0, begin + MATRIX_BEGIN.length)}\n${table}\n${doc.slice(end)}`;
}

/** Writes this run's rows into the document (atomically), if the run had any. Returns what it did, for the log. */
export function writeMatrixDocs(tsvFile: string, docFile: string, sinceIso: string): string | undefined {
  if (!existsSync(tsvFile)) return undefined;
  const table = matrixTable(readFileSync(tsvFile, 'utf8'), sinceIso);
  if (!table) return undefined;
  const doc = withMatrixTable(readFileSync(docFile, 'utf8'), table);
  if (!doc) return `path matrix: no markers in ${docFile}; table not written`;
  const tmp = `${docFile}.${process.pid}.tmp`;
  writeFileSync(tmp, doc);
  renameSync(tmp, docFile);
  return `path matrix: ${table.split('\n').length - 4} row(s) written into ${path.relative(process.cwd(), docFile)}`;
}
