import { describe, expect, it } from 'vitest';
import { yargs } from './cli-library.js';
import { diffCommand } from './commands/diff.js';
import { restoreCommand } from './commands/restore.js';

/** What a command's own builder makes of a command line (no handler runs). */
const kindsOf = (builder: (y: any) => any, argv: string[]): unknown => builder(yargs(argv)).parseSync().kinds;

describe('--kinds', () => {
  it('is taken comma-separated and repeated, alike by restore and diff', () => {
    const argv = ['bundle', '--kinds', 'IPAMHandle,IPAMBlock', '--kinds', ' IPPool ,'];
    for (const command of [restoreCommand, diffCommand]) expect(kindsOf(command.builder as any, argv)).toEqual(['IPAMHandle', 'IPAMBlock', 'IPPool']);
    expect(kindsOf(restoreCommand.builder as any, ['bundle'])).toBeUndefined();
  });
});
