import fs from 'node:fs';
import { toolVersion } from '../core/version.js';
import { CACHED_WIDTHS, HELP_CACHE_FILE, renderHelp, type HelpCache } from './help-cache.js';
import { buildParser } from './parser.js';

/** Render the top-level help with the parser itself and write the cache (`npm run build` runs this after tsc). */
async function writeHelpCache(): Promise<void> {
  const help: Record<string, string> = {};
  for (const width of CACHED_WIDTHS) help[String(width)] = await renderHelp(buildParser, width);
  const tmp = `${HELP_CACHE_FILE}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify({ version: toolVersion(), help } satisfies HelpCache) + '\n');
  fs.renameSync(tmp, HELP_CACHE_FILE);
}

writeHelpCache().catch((err) => {
  process.stderr.write(`write-help-cache: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
