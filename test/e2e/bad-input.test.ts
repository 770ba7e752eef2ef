/**
 * Bad-input corpus: malformed and hostile bundles (directories and hand-built tar.gz archives),
 * bad plan files, bad config/mapping files, unknown providers and kinds, a broken --provider-module and wrong
 * flags, for every command that takes input. Each case runs the built CLI in its own sandbox and checks:
 *   - the documented exit code (2 bad input, 4 environment, 5 refused);
 *   - one clear `cni-rewind: ...` line on stderr (optionally one indented hint line), no stack trace;
 *   - nothing written anywhere in the sandbox (input files, cwd and TMPDIR compared before/after), so a
 *     `../../x`, an absolute path or a link in an archive never lands on disk, and no temp dir is leaked.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { packageRoot } from '../../src/core/package-root.js';
import { applyFixture, runCli, testClient } from './helpers.js';
import { populateCalico } from './population.js';
import { trustCases, trustHelpers, trustSetup, type TrustBase } from './trust-cases.js';
import { storageCases } from './trust-cases-storage.js';
import { bundleDirCases } from './bad-input-bundles.js';
import { otherInputCases } from './bad-input-inputs.js';
import {
  base,
  manifestEntry,
  sha256,
  someObject,
  bundleCopy,
  writeIn,
  tgzIn,
  setCorpusPaths,
  tree,
  work,
  type Case,
  type Sandbox,
} from './bad-input-support.js';

const trust = {} as TrustBase;
const trustList = trustCases(trust, { bundleCopy, writeIn, tgzIn, manifestEntry, someObject, sha256 });
const storageList = storageCases(trustHelpers(trust, { bundleCopy, writeIn, tgzIn, manifestEntry, someObject, sha256 }));
const cases: Case[] = [...bundleDirCases, ...otherInputCases, ...trustList, ...storageList];

describe('bad input: one clear line, the documented exit code, nothing written', () => {
  let client: KubeClient;

  beforeAll(async () => {
    client = await testClient();
    await applyFixture(client, '3.28.1', 'tigera-operator.yaml');
    await populateCalico(client, { prefix: 'bad', nodes: ['bad-node-1'], customResources: false });
    setCorpusPaths(fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-bad-input-')));
    const r = await runCli(['export', '--out', base]);
    expect(r.code, r.stderr).toBe(0);
    const t = await runCli(['export', '--out', `${work}/base.tar.gz`, '--exclude-secrets']);
    expect(t.code, t.stderr).toBe(0);
    expect((await runCli(['verify', base])).code).toBe(0);
    Object.assign(trust, await trustSetup(work, base));
  });
  afterAll(() => {
    client?.close();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('the corpus has at least 100 cases with distinct names, and docs/RELIABILITY.md gives its true size', () => {
    expect(cases.length).toBeGreaterThanOrEqual(100);
    expect(new Set(cases.map((c) => c.name)).size).toBe(cases.length);
    const doc = fs.readFileSync(path.join(packageRoot(), 'docs', 'RELIABILITY.md'), 'utf8');
    expect(doc.match(/is a corpus of (\d+) cases/)?.[1], 'the count in docs/RELIABILITY.md').toBe(String(cases.length));
    expect(doc.match(/the (\d+) cases of issue 18 live in/)?.[1], 'the issue-18 count in docs/RELIABILITY.md').toBe(String(trustList.length));
    expect(doc.match(/the (\d+) cases of issue 32 in/)?.[1], 'the issue-32 count in docs/RELIABILITY.md').toBe(String(storageList.length));
  });

  it("every case's exit code is in README's exit-code table, and a case names an environment or refusal as the table does", () => {
    const readme = fs.readFileSync(path.join(packageRoot(), 'README.md'), 'utf8');
    const table = readme.split('## Exit codes')[1]!.split('\n## ')[0]!;
    const meaning = new Map([...table.matchAll(/^\| (\d) \| (.+) \|$/gm)].map((m) => [Number(m[1]), m[2]!]));
    expect(meaning.get(2)).toMatch(/bad input/);
    expect(meaning.get(4)).toMatch(/environment/);
    expect(meaning.get(5)).toMatch(/refused/);
    const wrong = cases.filter((c) => {
      // Bad input never means success or "differences found"; 3 is a partial failure (a planted object kept, the rest done).
      if (c.code < 2 || !meaning.has(c.code)) return true;
      // A kubeconfig that is missing or cannot be read as a file is the environment (README: 4), not the user's input.
      if (/kubeconfig (that does not exist|is a FIFO|\/dev\/zero|is a directory)|only missing files/.test(c.name)) return c.code !== 4;
      return c.code === 4 ? !/environment|unreachable|cannot reach/i.test(c.name) : false;
    });
    expect(
      wrong.map((c) => `${c.name}: ${c.code}`),
      'cases whose exit code does not match the table',
    ).toEqual([]);
  });

  for (const c of cases) {
    it.concurrent(c.name, async () => {
      const root = fs.mkdtempSync(path.join(work, 'sb-'));
      const sb: Sandbox = { root, in: path.join(root, 'in'), cwd: path.join(root, 'cwd'), tmp: path.join(root, 'tmp', 'a', 'b') };
      for (const d of [sb.in, sb.cwd, sb.tmp]) fs.mkdirSync(d, { recursive: true });
      const args = c.args(sb);
      const before = tree(root);
      const baseBefore = tree(base);
      const r = await runCli(args, { cwd: sb.cwd, env: { TMPDIR: sb.tmp, ...c.env }, timeoutMs: 120_000 });
      const what = `${args.join(' ')}\n--- stderr:\n${r.stderr}\n--- stdout:\n${r.stdout.slice(0, 2000)}`;
      expect(r.code, what).toBe(c.code);
      // Progress lines may come first; the error is one `cni-rewind:` line at the end, optionally followed by one hint line.
      const lines = r.stderr.replace(/\n$/, '').split('\n');
      const errLines = lines.filter((l) => l.startsWith('cni-rewind: '));
      expect(errLines.length, `exactly one error line: ${what}`).toBe(1);
      const tail = lines.slice(lines.indexOf(errLines[0]!) + 1);
      expect(tail.length, `at most a hint after the error line: ${what}`).toBeLessThanOrEqual(1);
      if (tail[0] !== undefined) expect(tail[0], what).toMatch(/^ {2}\S/);
      expect(r.stderr, what).toMatch(c.message);
      expect(r.stderr + r.stdout, `no stack trace: ${what}`).not.toMatch(/\n\s+at .+[(:]\d+|node:internal|unexpected error/);
      expect(tree(root), `nothing written in the sandbox (inputs, cwd, TMPDIR): ${what}`).toEqual(before);
      expect(tree(base), 'the base bundle is untouched').toEqual(baseBefore);
      c.after?.(sb);
      fs.rmSync(root, { recursive: true, force: true });
    });
  }
});
