import { describe, expect, it } from 'vitest';
import { commandName, commandTable, commandWord } from './index.js';

describe('the command table', () => {
  it('shows each command as its module defines it (command string and description)', async () => {
    for (const e of commandTable) {
      const m = await e.load();
      expect({ command: m.command, describe: m.describe }, commandName(e)).toEqual({ command: e.command, describe: e.describe });
      expect(typeof m.handler === 'function' || typeof m.builder === 'function', commandName(e)).toBe(true);
    }
  });

  it('has one entry per command word', () => {
    const names = commandTable.map(commandName);
    expect(new Set(names).size).toBe(names.length);
  });
});

describe('commandWord', () => {
  it('skips options and the values of the global options that take one', () => {
    expect(commandWord(['inspect', 'b'])).toBe('inspect');
    expect(commandWord(['-o', 'json', 'version'])).toBe('version');
    expect(commandWord(['--kubeconfig', 'k', '--context', 'c', '-v', 'status'])).toBe('status');
    expect(commandWord(['--kubeconfig=k', '--output=yaml', 'diff', 'b'])).toBe('diff');
    expect(commandWord(['--help'])).toBeUndefined();
    expect(commandWord([])).toBeUndefined();
    expect(commandWord(['--', 'backup'])).toBeUndefined();
  });
});
