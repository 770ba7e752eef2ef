import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const commandsDir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'commands');

describe('CLI output', () => {
  it('command handlers print only through the host (ctx.print, ctx.host), so redaction and escaping apply', () => {
    const direct = readdirSync(commandsDir)
      .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))
      .flatMap((f) =>
        readFileSync(path.join(commandsDir, f), 'utf8')
          .split('\n')
          .map((line, i) => ({ where: `${f}:${i + 1}`, line }))
          .filter(({ line }) => /process\.(stdout|stderr)\.write|console\.(log|error|warn|info)/.test(line))
          .map(({ where }) => where),
      );
    expect(direct).toEqual([]);
  });
});
