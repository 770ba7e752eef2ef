import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { findExecutable } from './executable.js';

describe('the program a command runs: given on the command line, else on PATH', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-exe-'));
  const tool = path.join(dir, 'calicoctl');
  writeFileSync(tool, '#!/bin/sh\n');
  chmodSync(tool, 0o755);
  const plain = path.join(dir, 'plain');
  writeFileSync(plain, 'not a program');
  it('finds it on PATH, and takes a given executable file as an absolute path', () => {
    expect(findExecutable('calicoctl', undefined, { PATH: `/nonexistent:${dir}` })).toEqual({ path: tool });
    expect(findExecutable('calicoctl', path.relative(process.cwd(), tool), { PATH: '' })).toEqual({ path: tool });
  });
  it('says why not for a file that is not executable, a folder, or nothing on PATH', () => {
    expect(findExecutable('x', plain, {})).toEqual({ missing: `${plain} is not an executable file` });
    expect(findExecutable('x', dir, {})).toEqual({ missing: `${dir} is not an executable file` });
    expect(findExecutable('calicoctl', undefined, { PATH: '/nonexistent' })).toEqual({ missing: 'calicoctl is not on PATH' });
  });
});

describe("a program's message in one line", () => {
  it('is its last non-empty line, control characters replaced, at most 300 characters', async () => {
    const { lastLine } = await import('./last-line.js');
    expect(lastLine('first\nError: boom\n\n')).toBe('Error: boom');
    expect(lastLine('bad \u001b[31mred\u0007')).toBe('bad ?[31mred?');
    expect(lastLine('x'.repeat(400))).toBe(`${'x'.repeat(300)}...`);
    expect(lastLine('')).toBe('');
  });
});
