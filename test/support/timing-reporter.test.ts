import { describe, expect, it } from 'vitest';
import type { TestModule } from 'vitest/node';
import { failureLines } from './timing-reporter.js';

/** A module as the reporter reads it: its id, its own errors and its tests' results. */
function fakeModule(
  id: string,
  tests: { name: string; state: string; errors?: { message: string; stack?: string }[] }[],
  errors: { message: string }[] = [],
): TestModule {
  return {
    moduleId: id,
    errors: () => errors,
    children: { allTests: () => tests.map((t) => ({ fullName: t.name, result: () => ({ state: t.state, errors: t.errors }) })) },
  } as unknown as TestModule;
}

describe('failureLines', () => {
  it('names every failed test with the head of its first error, after nothing when all passed', () => {
    expect(failureLines([fakeModule('/r/a.test.ts', [{ name: 'ok', state: 'passed' }])], '/r')).toEqual([]);
    const long = Array.from({ length: 100 }, (_, i) => `line ${i}`).join('\n');
    const lines = failureLines(
      [
        fakeModule(
          '/r/test/e2e/demo.test.ts',
          [{ name: 'demo plays', state: 'failed', errors: [{ message: 'x', stack: long }] }],
          [{ message: 'setup broke' }],
        ),
      ],
      '/r',
    );
    expect(lines[0]).toBe('== failed: 2');
    expect(lines).toContain('-- test/e2e/demo.test.ts (the file itself)');
    expect(lines).toContain('   setup broke');
    expect(lines).toContain('-- test/e2e/demo.test.ts > demo plays');
    expect(lines).toContain('   line 44');
    expect(lines).not.toContain('   line 45');
  });
});
