import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../core/package-root.js';

/** Run a handler of the built CLI (npm test builds first) in a fresh Node process: what is tested is how it exits. */
function runHandler(body: string) {
  const script = `
    const { handler } = await import(${JSON.stringify(path.join(packageRoot(), 'dist', 'src', 'cli', 'context.js'))});
    await handler(async () => { ${body} })({ verbose: false, output: 'table', color: false, yes: false, quiet: false });
  `;
  return spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
}

describe('handler()', () => {
  it('a command that waits on a promise nothing settles exits 1 with one line, not 0', () => {
    const r = runHandler('await new Promise(() => {});');
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^cni-rewind: internal error: the command stopped before it finished/);
  });

  it('a command that finishes keeps its own exit code', () => {
    expect(runHandler('return 3;').status).toBe(3);
    expect(runHandler('return;').status).toBe(0);
  });

  it('an error from another copy of the package (a second instance of errors.js) keeps its exit code and hint', () => {
    const copy = JSON.stringify(`${pathToFileURL(path.join(packageRoot(), 'dist', 'src', 'core', 'errors.js')).href}?another-copy`);
    const r = runHandler(
      `const { EnvironmentError } = await import(${copy}); throw new EnvironmentError('provider x: unreachable', { hint: 'check the VPN' });`,
    );
    expect(r.stderr).toBe('cni-rewind: provider x: unreachable\n  check the VPN\n');
    expect(r.status).toBe(4);
  });
});
