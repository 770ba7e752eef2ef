import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { RecordingIoHost, Reporter } from './host.js';
import { EXTERNAL_PREFIX, MESSAGES, isMessageCode } from './messages.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const docsDir = path.join(root, 'docs');
const CODE = /\bCNR_[A-Z0-9]+(?:_[A-Z0-9]+)*\b/g;

/** The rows of docs/messages.md's tables: code -> level. */
function documentedLevels(): Map<string, string> {
  const rows = new Map<string, string>();
  for (const line of readFileSync(path.join(docsDir, 'messages.md'), 'utf8').split('\n')) {
    const m = /^\| `(CNR_[A-Z0-9_]+)` \| (\w+) \|/.exec(line);
    if (m) {
      expect(rows.has(m[1]!), `${m[1]} is documented twice`).toBe(false);
      rows.set(m[1]!, m[2]!);
    }
  }
  return rows;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.test.ts'))
    .map((e) => path.join(e.parentPath, e.name));
}

describe('message catalogue', () => {
  it('documents every code of the catalogue, at its level, in docs/messages.md, and no other', () => {
    const documented = documentedLevels();
    const catalogue = new Map(Object.entries(MESSAGES).map(([code, def]) => [code, def.level as string]));
    expect(catalogue.size).toBeGreaterThan(50);
    expect(
      [...catalogue.keys()].filter((c) => !documented.has(c)),
      'in the catalogue, not documented',
    ).toEqual([]);
    expect(
      [...documented.keys()].filter((c) => !catalogue.has(c)),
      'documented, not in the catalogue',
    ).toEqual([]);
    for (const [code, level] of catalogue) expect(documented.get(code), code).toBe(level);
  });

  it('names no code in any doc that the catalogue lacks (third-party CNR_EXT_ codes aside)', () => {
    const docs = [
      path.join(root, 'README.md'),
      ...readdirSync(docsDir)
        .filter((f) => f.endsWith('.md'))
        .map((f) => path.join(docsDir, f)),
    ];
    const unknown: string[] = [];
    for (const file of docs) {
      for (const [code] of readFileSync(file, 'utf8').matchAll(CODE)) {
        if (!isMessageCode(code) && !code.startsWith(EXTERNAL_PREFIX)) unknown.push(`${path.basename(file)}: ${code}`);
      }
    }
    expect(unknown).toEqual([]);
  });

  it('keeps the third-party prefix free: no built-in code has it, none is emitted from src/ or providers/', () => {
    expect(Object.keys(MESSAGES).filter((c) => c.startsWith(EXTERNAL_PREFIX))).toEqual([]);
    const catalogue = path.join(root, 'src', 'io', 'messages.ts');
    const emitting = [...sourceFiles(path.join(root, 'src')), ...sourceFiles(path.join(root, 'providers'))].filter(
      (f) => f !== catalogue && readFileSync(f, 'utf8').includes(`'${EXTERNAL_PREFIX}`),
    );
    expect(emitting).toEqual([]);
  });

  it('types the reporter by the catalogue (checked by tsc in npm run build)', () => {
    const host = new RecordingIoHost();
    const r = new Reporter(host);
    r.info('CNR_STEP_SKIP', 'skip', { step: 'preflight', index: 1 });
    r.debug('CNR_EXT_QCOW2_SNAPSHOT', 'a third party may send any payload', { anything: true });
    // @ts-expect-error: not a code of the catalogue
    r.info('CNR_STEP_SKIPPED', 'typo');
    // @ts-expect-error: a warn code sent as info
    r.info('CNR_RESTORE_DRIFT', 'wrong level');
    // @ts-expect-error: the payload lacks index
    r.info('CNR_STEP_SKIP', 'wrong payload', { step: 'preflight' });
    // @ts-expect-error: this code carries no payload
    r.info('CNR_EXPORT_DONE', 'unexpected payload', { files: 3 });
    // At run time the reporter forwards whatever it is given: the checks above are the compiler's.
    expect(host.messages.map((m) => `${m.level} ${m.code}`)).toEqual([
      'info CNR_STEP_SKIP',
      'debug CNR_EXT_QCOW2_SNAPSHOT',
      'info CNR_STEP_SKIPPED',
      'info CNR_RESTORE_DRIFT',
      'info CNR_STEP_SKIP',
      'info CNR_EXPORT_DONE',
    ]);
  });
});
