import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { toolVersion } from '../core/version.js';

/**
 * The top-level `--help` text, rendered by yargs at build time for the usual widths. Loading yargs and its helpers
 * is most of what `cni-rewind --help` costs (docs/BENCHMARKS.md, start-up): a user who asks for help waits for
 * nothing else. The cache is the parser's own output (a unit test compares them) and is used only when it was
 * written for this version after the parser was built; any other width, name or flag goes through yargs.
 */
const here = path.dirname(fileURLToPath(import.meta.url));
export const HELP_CACHE_FILE = path.join(here, 'help-cache.json');
/** Files whose change changes the top-level help: a cache older than either is not used. */
const SOURCES = ['parser.js', 'commands/index.js'].map((f) => path.join(here, f));

/** Widths rendered: 100 when the output is not a terminal, 120 for any terminal that wide or wider. */
export const CACHED_WIDTHS = [100, 120] as const;

/** The width the help is wrapped to: the terminal's, at most 120; 100 when the output is not a terminal. */
export const helpWidth = (columns: number | undefined): number => Math.min(120, columns ?? 100);

export interface HelpCache {
  version: string;
  help: Record<string, string>;
}

/** The cached help for `width`, or undefined when there is none that can be trusted. */
export function cachedHelp(width: number): string | undefined {
  try {
    const written = fs.statSync(HELP_CACHE_FILE).mtimeMs;
    if (SOURCES.some((f) => fs.statSync(f).mtimeMs > written)) return undefined;
    const cache = JSON.parse(fs.readFileSync(HELP_CACHE_FILE, 'utf8')) as HelpCache;
    return cache.version === toolVersion() ? cache.help[String(width)] : undefined;
  } catch {
    return undefined;
  }
}

/** What yargs prints for `--help` at `width` (its help text and the newline it ends with). */
export async function renderHelp(build: (argv: string[], opts: { width: number }) => Promise<{ getHelp(): Promise<string> }>, width: number): Promise<string> {
  return (await (await build(['--help'], { width })).getHelp()) + '\n';
}
