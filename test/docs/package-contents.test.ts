/**
 * What `npm pack` ships: the compiled engine, CLI and providers, the Calico release manifests and the docs, and
 * nothing of the tests, benchmarks or their support code (they are compiled into dist/ too, for the e2e harness).
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/core/package-root.js';

describe('the npm package', () => {
  it('lists no test, benchmark, fake or test-support file, and has what the CLI needs', { timeout: 60_000 }, () => {
    const root = packageRoot();
    expect(existsSync(path.join(root, 'dist', 'src', 'cli', 'main.js')), 'run `npm run build` first').toBe(true);
    const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    const files: string[] = JSON.parse(out)[0].files.map((f: { path: string }) => f.path);
    const testCode = files.filter((f) => /(^|\/)(test|bench|fakes|support)\//.test(f) || /\.test\.|testing|test-support|fake/i.test(f));
    expect(testCode).toEqual([]);
    for (const needed of ['dist/src/cli/main.js', 'calico-releases/index.json', 'README.md', 'package.json']) expect(files).toContain(needed);
    expect(files.some((f) => f.startsWith('dist/providers/aws/'))).toBe(true);
  });
});
