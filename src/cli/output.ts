import { createRequire } from 'node:module';

export type OutputFormat = 'table' | 'json' | 'yaml';

export interface Column<T> {
  header: string;
  value: (row: T) => string | number | undefined;
}

/** A plain text table with padded columns; the last column is never padded. */
export function renderTable<T>(rows: readonly T[], columns: readonly Column<T>[]): string {
  const cells = rows.map((r) => columns.map((c) => String(c.value(r) ?? '')));
  const widths = columns.map((c, i) => Math.max(c.header.length, ...cells.map((row) => row[i]!.length)));
  const line = (vals: string[]) => vals.map((v, i) => (i === vals.length - 1 ? v : v.padEnd(widths[i]!))).join('  ').trimEnd();
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
