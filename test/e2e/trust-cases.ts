/**
 * Trust-boundary cases for the bad-input corpus (bad-input.test.ts runs them with its sandbox checks: the exit code,
 * one `cni-rewind:` line, no stack trace, nothing written). Plans edited after `plan`, journals that are links or
 * directories, bundles with linked directories, prototype-named files, swapped or re-labelled encrypted files,
 * archives with a file and a directory of one name, a manifest nested 5,000 deep, FIFOs and /dev/zero as
 * kubeconfig or key file.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import type { Case, Sandbox, TarEntry } from './bad-input-support.js';
import { planAndJournalCases } from './trust-cases-plans.js';
import { fileAndKeyCases } from './trust-cases-files.js';
import { K } from '../../src/kube/builtin.js';
import { loadPlanKey, signPlan } from '../../src/plan/signature.js';
import { runCli, testClient } from './helpers.js';

export interface TrustBase {
  /** The base bundle (a directory export of the test cluster). */
  base: string;
  /** A plan (JSON) made by `plan` against the base bundle. */
  plan: string;
  /** An encrypted export of the test cluster (key KEY below). */
  enc: string;
}

export const TRUST_KEY = '5f'.repeat(32);

export async function trustSetup(work: string, base: string): Promise<TrustBase> {
  const plan = path.join(work, 'trust-plan.json');
  const p = await runCli(['plan', '--to', '3.27.4', '--bundle', base, '--no-disk-snapshots', '--out', plan]);
  expect(p.code, p.stderr).toBe(0);
  // Two Secrets at least, so that two encrypted files can be swapped.
  const client = await testClient();
  for (const n of ['trust-s1', 'trust-s2']) {
    if (!(await client.getOrUndefined(K.secret, 'tigera-operator', n)))
      await client.create(K.secret, { apiVersion: 'v1', kind: 'Secret', metadata: { name: n, namespace: 'tigera-operator' }, stringData: { v: n } } as any);
  }
  client.close();
  const enc = path.join(work, 'trust-enc');
  const e = await runCli(['export', '--encrypt', '--out', enc], { env: { CNI_REWIND_ENCRYPTION_KEY: TRUST_KEY } });
  expect(e.code, e.stderr).toBe(0);
  return { base, plan, enc };
}

interface Helpers {
  bundleCopy: (sb: Sandbox, edit: (dir: string, manifest: any) => void, name?: string) => string;
  writeIn: (sb: Sandbox, name: string, content: string | Buffer) => string;
  tgzIn: (sb: Sandbox, entries: TarEntry[], name?: string) => string;
  manifestEntry: () => TarEntry;
  someObject: (mf: any) => string;
  sha256: (b: Buffer | string) => string;
}

/** The helpers the trust cases share: edited plans, planted journals, FIFOs, edited encrypted bundles. */
export function trustHelpers(t: TrustBase, h: Helpers) {
  const { bundleCopy, writeIn, tgzIn, manifestEntry, someObject, sha256 } = h;
  /**
   * The base plan, edited, written into the sandbox. Each edited plan gets its own id, so its journal
   * (`<bundle>.<planId>.journal`) is its own: a code that let one edited plan through would not make the others
   * fail for another reason ("already started").
   */
  const planWith = (sb: Sandbox, edit: (p: any) => void, name = 'edited.json', resign = true) => {
    const p = JSON.parse(fs.readFileSync(t.plan, 'utf8'));
    p.id = `edited-${path.basename(sb.root)}`;
    edit(p);
    // Signed again with the user's key (the one `plan` used): these cases show that apply's own checks hold even
    // for a plan its user signed. Without re-signing, every edit is refused by the signature check first.
    return writeIn(sb, name, JSON.stringify(resign ? signPlan(p, loadPlanKey({ create: true })!) : p));
  };
  /**
   * A plan whose bundle (a real copy of the base bundle, so nothing else refuses the plan first) sits in the
   * sandbox, so its journal path does too.
   */
  const planInSandbox = (sb: Sandbox, plant: (journal: string) => void) => {
    const bundle = path.join(sb.in, 'jb');
    fs.cpSync(t.base, bundle, { recursive: true });
    plant(path.join(sb.in, 'jb.journal-plan.journal'));
    return planWith(sb, (p) => {
      p.id = 'journal-plan';
      p.bundle.path = bundle;
    });
  };
  /**
   * Apply cases run with the test hook that SIGKILLs apply after its first step: should a check be missing,
   * apply stops after the (read-only) preflight step instead of changing the test cluster, and the case fails
   * on the exit code.
   */
  const STOP = { CNI_REWIND_TEST_KILL_AFTER_STEP: '1' };
  /** `apply PLAN --yes`, plus --break-lock so that a lock left by such a killed run does not refuse the next case for another reason. */
  const apply = (plan: string, ...more: string[]) => ['apply', plan, ...more, '--yes', '--break-lock'];
  const mkfifo = (sb: Sandbox, name: string) => {
    const f = path.join(sb.in, name);
    execFileSync('mkfifo', [f]);
    return f;
  };
  const encCopy = (sb: Sandbox, edit: (dir: string, m: any, secrets: string[]) => void) => {
    const dir = path.join(sb.in, 'enc');
    fs.cpSync(t.enc, dir, { recursive: true });
    const m = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
    edit(
      dir,
      m,
      Object.keys(m.files)
        .filter((f) => m.files[f].encrypted)
        .sort(),
    );
    fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify(m, null, 2));
    return dir;
  };
  /** Swap two encrypted files and fix their checksums, so only the encryption can tell. */
  const swap = (dir: string, m: any, [a, b]: string[]) => {
    const da = fs.readFileSync(path.join(dir, a!));
    const db = fs.readFileSync(path.join(dir, b!));
    fs.writeFileSync(path.join(dir, a!), db);
    fs.writeFileSync(path.join(dir, b!), da);
    m.files[a!] = { ...m.files[a!], sha256: sha256(db), size: db.length };
    m.files[b!] = { ...m.files[b!], sha256: sha256(da), size: da.length };
  };
  const keyEnv = { CNI_REWIND_ENCRYPTION_KEY: TRUST_KEY };
  /** Pass an encrypted bundle's manifest off as format 1.0, which had no MAC. */
  const relabelLegacy = (m: any) => {
    m.formatVersion = '1.0.0';
    delete m.encryption.mac;
  };
  const deep = (n: number) => '{"x":'.repeat(n) + '1' + '}'.repeat(n);
  /** The manifest as text with a deeply nested value spliced in (JSON.stringify itself would overflow on it). */
  const deepManifest = (n: number) => (d: string, m: any) => {
    m.__raw = true;
    const raw = fs.readFileSync(path.join(d, 'manifest.json'), 'utf8');
    fs.writeFileSync(path.join(d, 'manifest.json'), raw.replace('"notes": [', `"deep": ${deep(n)}, "notes": [`));
  };

  return {
    t,
    bundleCopy,
    writeIn,
    tgzIn,
    manifestEntry,
    someObject,
    sha256,
    planWith,
    planInSandbox,
    STOP,
    apply,
    mkfifo,
    encCopy,
    swap,
    keyEnv,
    relabelLegacy,
    deep,
    deepManifest,
  };
}

export type TrustHelpers = ReturnType<typeof trustHelpers>;

export function trustCases(t: TrustBase, h: Helpers): Case[] {
  const c = trustHelpers(t, h);
  return [...planAndJournalCases(c), ...fileAndKeyCases(c)];
}
