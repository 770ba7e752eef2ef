import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../core/package-root.js';
import { CACHED_WIDTHS, renderHelp } from './help-cache.js';
import { fastAnswer } from './main.js';
import { buildParser } from './parser.js';

/**
 * `--help`, `--version` and `version` on their own are answered without loading yargs (src/cli/main.ts): what they
 * print must be exactly what the parser prints for the same command line. Runs the built CLI (dist/, as `npm test`
 * builds it), once through the fast answer and once through the parser.
 */
const dist = path.join(packageRoot(), 'dist/src/cli');
const env = { ...process.env, NO_COLOR: '1' };

/** The built CLI as a user runs it. */
const cli = (args: string[]) => spawnSync(process.execPath, [path.join(dist, 'main.js'), ...args], { encoding: 'utf8', env });
/** The same command line through the parser (yargs), as every other command line goes. */
const viaParser = (args: string[]) =>
  spawnSync(
    process.execPath,
    ['--input-type=module', '-e', `const { main } = await import(${JSON.stringify(path.join(dist, 'parser.js'))}); await main(${JSON.stringify(args)});`],
    { encoding: 'utf8', env },
  );

describe('answers without the argument parser', () => {
  for (const args of [['--help'], ['-h'], ['--version'], ['version']]) {
    it(`cni-rewind ${args[0]} prints what the parser prints`, () => {
      const fast = cli(args);
      const slow = viaParser(args);
      expect(slow.status, slow.stderr).toBe(0);
      expect(fast.status, fast.stderr).toBe(0);
      expect(fast.stdout).toBe(slow.stdout);
      expect(fast.stdout.length).toBeGreaterThan(4);
    });
  }

  it('the help cache the build wrote is the parser output at each width it holds', async () => {
    const cache = JSON.parse(fs.readFileSync(path.join(dist, 'help-cache.json'), 'utf8'));
    for (const width of CACHED_WIDTHS) expect(cache.help[String(width)], `width ${width}`).toBe(await renderHelp(buildParser, width));
  });

  it('anything else goes to the parser', () => {
    expect(fastAnswer(['version', '-o', 'json'], undefined, false)).toBeUndefined();
    expect(fastAnswer(['status'], undefined, false)).toBeUndefined();
    expect(fastAnswer(['--help'], undefined, true), 'as kubectl cni-rewind the usage line differs').toBeUndefined();
    expect(fastAnswer(['--version'], undefined, true)).toBeUndefined();
  });

  it('running a command does not render its help text on the way (only --help and getHelp() do)', async () => {
    const parser = await buildParser(['version']);
    const usage = (parser as any).getInternalMethods().getUsageInstance();
    let rendered = 0;
    const help = usage.help;
    usage.help = function (this: unknown) {
      rendered++;
      return help.call(this);
    };
    // What yargs calls right after a command's handler starts.
    usage.cacheHelpMessage();
    expect(rendered, 'help rendered while running a command').toBe(0);
    expect(await parser.getHelp()).toMatch(/cni-rewind version/);
    expect(rendered, 'getHelp() renders it (control)').toBeGreaterThan(0);
  });
});
