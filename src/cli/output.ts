import { createRequire } from 'node:module';

export type OutputFormat = 'table' | 'json' | 'yaml';

export interface Column<T> {
  header: string;
  value: (row: T) => string | number | undefined;
}

/** This tool's own colour codes (see styler): the only escape sequences that may reach the terminal. */
const OWN_SGR = /^\x1b\[(?:1|2|22|31|32|33|39)m/;
// C0 controls, DEL, C1 controls, and the Unicode line/paragraph separators and bidi overrides.
const CONTROL = /[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

function escapeChar(c: string): string {
  const n = c.charCodeAt(0);
  if (c === '\n') return '\\n';
  if (c === '\r') return '\\r';
  if (c === '\t') return '\\t';
  return n <= 0xff ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u${n.toString(16).padStart(4, '0')}`;
}

/**
 * The one escaping helper of the output layer: control characters from a bundle, a journal or the cluster
 * (ESC, BEL, CR, newlines, ...) are shown as `\x1b`, `\n`, ... so they can neither drive the terminal nor fake
 * a line. `multiline` keeps newlines and tabs (for whole rendered texts) and this tool's own colour codes.
 */
export function escapeControl(text: string, opts: { multiline?: boolean } = {}): string {
  return text.replace(CONTROL, (c, offset: number, all: string) => {
    if (opts.multiline && (c === '\n' || c === '\t')) return c;
    if (opts.multiline && c === '\x1b' && OWN_SGR.test(all.slice(offset, offset + 6))) return c;
    return escapeChar(c);
  });
}

/** One value for a one-line slot of human output (a name, an id, a version): nothing in it can break the line. */
export const oneLine = (v: unknown): string => escapeControl(String(v ?? ''));

/** A plain text table with padded columns; the last column is never padded. */
export function renderTable<T>(rows: readonly T[], columns: readonly Column<T>[]): string {
  const cells = rows.map((r) => columns.map((c) => oneLine(c.value(r))));
  const widths = columns.map((c, i) => Math.max(c.header.length, ...cells.map((row) => row[i]!.length)));
  const line = (vals: string[]) =>
    vals
      .map((v, i) => (i === vals.length - 1 ? v : v.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.header.toUpperCase())), ...cells.map(line)].join('\n');
}

/** Structured output for `-o json|yaml`. */
export function renderData(data: unknown, format: 'json' | 'yaml'): string {
  if (format === 'json') return JSON.stringify(data, null, 2);
  // js-yaml is loaded only for `-o yaml`, not at the start of every command (this function must stay synchronous).
  const yaml = createRequire(import.meta.url)('js-yaml') as typeof import('js-yaml');
  return yaml.dump(data, { noRefs: true, lineWidth: 120 }).trimEnd();
}

export interface Styler {
  bold(s: string): string;
  red(s: string): string;
  yellow(s: string): string;
  green(s: string): string;
  dim(s: string): string;
}

export function styler(color: boolean): Styler {
  const wrap = (code: number, reset: number) => (s: string) => (color ? `\x1b[${code}m${s}\x1b[${reset}m` : s);
  return { bold: wrap(1, 22), red: wrap(31, 39), yellow: wrap(33, 39), green: wrap(32, 39), dim: wrap(2, 22) };
}
