import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/core/package-root.js';

/**
 * Every `cni-rewind ...` invocation written in the README and docs/ must be valid for the CLI as built:
 * its command exists (`<command> --help` exits 0) and every --flag it uses is one that command documents.
 */
const root = packageRoot();
const main = path.join(root, 'dist', 'src', 'cli', 'main.js');
const docs = [
  'README.md',
  ...readdirSync(path.join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

interface Invocation {
  file: string;
  words: string[];
}

function invocations(): Invocation[] {
  const out: Invocation[] = [];
  for (const file of docs) {
    const text = readFileSync(path.join(root, file), 'utf8');
    // Code blocks and inline code spans.
    const snippets = [...text.matchAll(/```[a-z]*\n([\s\S]*?)```/g)].map((m) => m[1]!).concat([...text.matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!));
    for (const snippet of snippets) {
      for (const line of snippet.split('\n')) {
        const m = /(?:^|[\s$;&|(])(?:npx\s+|kubectl\s+)?cni-rewind\s+([^#|;&)]*)/.exec(line);
        if (!m) continue;
        const words = m[1]!.trim().split(/\s+/).filter(Boolean);
        if (words.length) out.push({ file, words });
      }
    }
  }
  return out;
}

const helpCache = new Map<string, string>();
function help(cmd: string[]): string {
  const key = cmd.join(' ');
  if (!helpCache.has(key))
    helpCache.set(key, execFileSync(process.execPath, [main, ...cmd, '--help'], { encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } }));
  return helpCache.get(key)!;
}

describe('commands in the README and docs', () => {
  const all = invocations();
  it('finds the documented invocations', () => {
    expect(all.length).toBeGreaterThan(20);
  });
  const topHelp = help([]);
  const verbs = new Set([...topHelp.matchAll(/^\s+cni-rewind (\S+)/gm)].map((m) => m[1]!));
  for (const inv of all) {
    const verb = inv.words[0]!;
    if (verb.startsWith('-') || /^[A-Z<[]/.test(verb) || verb === '...') continue; // `cni-rewind --help`, prose placeholders
    it(`${inv.file}: cni-rewind ${inv.words.join(' ')}`, () => {
      expect(verbs.has(verb), `unknown command "${verb}"`).toBe(true);
      const sub = inv.words[1] && /^[a-z]+$/.test(inv.words[1]) && help([verb]).includes(`${verb} ${inv.words[1]}`) ? [verb, inv.words[1]] : [verb];
      const text = help(sub) + help([]);
      for (const w of inv.words) {
        const flag = /^(--?[a-zA-Z][\w-]*)/.exec(w)?.[1];
        if (!flag || flag === '--') continue;
        if (inv.words.indexOf('--') >= 0 && inv.words.indexOf(w) > inv.words.indexOf('--')) continue; // the wrapped command's own flags
        const name = flag.replace(/^--no-/, '--');
        expect(text.includes(name) || text.includes(flag), `${sub.join(' ')} does not document ${flag}`).toBe(true);
      }
    });
  }
});
