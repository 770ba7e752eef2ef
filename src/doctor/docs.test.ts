import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../core/package-root.js';

/** Every finding id a check can emit is explained in docs/troubleshooting.md (what, why, the exact fix). */
describe('docs/troubleshooting.md', () => {
  it('documents every finding id', () => {
    const dir = path.join(packageRoot(), 'src', 'doctor', 'checks');
    const ids = new Set<string>();
    for (const f of readdirSync(dir).filter((x) => x.endsWith('.ts') && !x.endsWith('.test.ts'))) {
      for (const m of readFileSync(path.join(dir, f), 'utf8').matchAll(/['"]([a-z]+(?:-[a-z0-9]+)+)['"]/g)) {
        // ids are the string literals used as `id:` values (possibly in a ternary)
        const line = readFileSync(path.join(dir, f), 'utf8')
          .split('\n')
          .find((l) => l.includes(m[0]))!;
        if (/\bid:/.test(line)) ids.add(m[1]!);
      }
    }
    expect(ids.size).toBeGreaterThanOrEqual(21);
    const doc = readFileSync(path.join(packageRoot(), 'docs', 'troubleshooting.md'), 'utf8');
    const missing = [...ids].filter((id) => !doc.includes(`\`${id}\``));
    expect(missing).toEqual([]);
  });
});
