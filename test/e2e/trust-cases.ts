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
import type { Case, Sandbox, TarEntry } from './bad-input.test.js';
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

export function trustCases(t: TrustBase, h: Helpers): Case[] {
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
  const deep = (n: number) => '{"x":'.repeat(n) + '1' + '}'.repeat(n);
  /** The manifest as text with a deeply nested value spliced in (JSON.stringify itself would overflow on it). */
  const deepManifest = (n: number) => (d: string, m: any) => {
    m.__raw = true;
    const raw = fs.readFileSync(path.join(d, 'manifest.json'), 'utf8');
    fs.writeFileSync(path.join(d, 'manifest.json'), raw.replace('"notes": [', `"deep": ${deep(n)}, "notes": [`));
  };

  return [
    // 1. the journal
    {
      name: 'apply: the journal is a symlink to another file (refused, nothing appended)',
      code: 5,
      env: STOP,
      message: /apply journal .* is a symbolic link; refusing to use it/,
      args: (sb) => apply(planInSandbox(sb, (j) => fs.symlinkSync(writeIn(sb, 'victim.txt', 'root:x:0:0\n'), j))),
    },
    {
      name: 'apply: the journal is a symlink to a missing file (refused, nothing created)',
      code: 5,
      env: STOP,
      message: /apply journal .* is a symbolic link/,
      args: (sb) => apply(planInSandbox(sb, (j) => fs.symlinkSync(path.join(sb.in, 'created-by-apply'), j))),
    },
    {
      name: 'apply: the journal is a directory (EISDIR, refused in one line)',
      code: 5,
      env: STOP,
      message: /apply journal .* is a directory; refusing to use it/,
      args: (sb) => apply(planInSandbox(sb, (j) => fs.mkdirSync(j))),
    },
    {
      name: 'apply: the journal is a FIFO (refused, no hang)',
      code: 5,
      env: STOP,
      message: /apply journal .* is not a regular file/,
      args: (sb) => apply(planInSandbox(sb, (j) => execFileSync('mkfifo', [j]))),
    },
    // 2. plans are re-checked
    {
      name: 'apply: plan edited to files: {} (release not checked before)',
      code: 5,
      env: STOP,
      message: /the target manifest \S+ .* has no checksum in the plan/,
      args: (sb) => apply(planWith(sb, (p) => (p.target.files = {}))),
    },
    {
      name: 'apply: plan with one release file left out of target.files (the others kept)',
      code: 5,
      env: STOP,
      message: /the target manifest \S+ .* has no checksum in the plan/,
      args: (sb) =>
        apply(
          planWith(sb, (p) => {
            delete p.target.files[Object.keys(p.target.files)[0]];
          }),
        ),
    },
    {
      name: 'apply: plan without its preflight step',
      code: 5,
      env: STOP,
      message: /its steps \(pause-operator, .*\) are not the ones its strategy in-place gives \(preflight, /,
      args: (sb) => apply(planWith(sb, (p) => (p.steps = p.steps.filter((s: any) => s.id !== 'preflight')))),
    },
    {
      name: 'apply: plan with a step taken from another strategy',
      code: 5,
      env: STOP,
      message: /are not the ones its strategy in-place gives/,
      args: (sb) => apply(planWith(sb, (p) => p.steps.splice(1, 0, { id: 'remove-old', title: 'x', description: 'x' }))),
    },
    {
      name: 'apply: plan says the bundle is fresh, max age edited to 1s (preflight re-run refuses)',
      code: 5,
      env: STOP,
      message: /apply refused by preflight: bundle-recent: made \d+ min ago \(limit --max-backup-age 1s\)/,
      args: (sb) =>
        apply(
          planWith(sb, (p) => {
            p.options.maxBackupAge = '1s';
            for (const c of p.preflight) c.ok = true;
          }),
        ),
    },
    {
      name: 'apply: plan pointed at another bundle with its checksum edited to match',
      code: 5,
      env: STOP,
      message: /apply refused by preflight: bundle-recent/,
      args: (sb) => {
        const other = bundleCopy(sb, (_, m) => (m.createdAt = '2020-01-01T00:00:00.000Z'), 'old');
        return apply(
          planWith(sb, (p) => {
            p.bundle.path = other;
            p.bundle.manifestSha256 = sha256(fs.readFileSync(path.join(other, 'manifest.json')));
          }),
        );
      },
    },
    // 2b. a plan's policy values are the signer's: an edit made without the plan signing key is refused
    {
      name: 'apply: plan edited to a looser policy (maxBackupAge 100000d) and an old bundle, not re-signed',
      code: 5,
      env: STOP,
      message: /the plan \S+ was changed after it was signed/,
      args: (sb) => {
        const old = bundleCopy(sb, (_, m) => (m.createdAt = '2020-01-01T00:00:00.000Z'), 'old');
        const edit = (p: any) => {
          p.options.maxBackupAge = '100000d';
          p.bundle.path = old;
          p.bundle.manifestSha256 = sha256(fs.readFileSync(path.join(old, 'manifest.json')));
        };
        return apply(planWith(sb, edit, 'edited.json', false));
      },
    },
    {
      name: 'apply: plan with its signature removed',
      code: 5,
      env: STOP,
      message: /the plan \S+ is not signed/,
      args: (sb) => apply(planWith(sb, (p) => delete p.signature, 'edited.json', false)),
    },
    {
      name: 'apply: plan checked with another plan signing key',
      code: 5,
      env: STOP,
      message: /was signed with another key/,
      args: (sb) =>
        apply(
          planWith(sb, () => undefined),
          '--plan-key-file',
          writeIn(sb, 'other.key', '0f'.repeat(32)),
        ),
    },
    {
      name: 'apply: plan for another cluster uid',
      code: 5,
      env: STOP,
      message: /this plan was made for cluster .* not this one/,
      args: (sb) => apply(planWith(sb, (p) => (p.cluster.uid = '00000000-0000-0000-0000-000000000000'))),
    },
    // 3. a plan cannot make apply import code
    {
      name: 'apply: plan naming a provider module not given on the command line (not imported)',
      code: 5,
      env: STOP,
      message: /would load the provider module .*evil\.mjs, which this apply command line does not give/,
      args: (sb) => {
        const evil = writeIn(sb, 'evil.mjs', `import fs from 'node:fs'; fs.writeFileSync(${JSON.stringify(path.join(sb.cwd, 'PWNED'))}, 'x');\n`);
        return apply(
          planWith(sb, (p) => {
            p.options.rebootNodes = true;
            p.steps.push({ id: 'reboot-nodes', title: 'r', description: 'r' });
            p.rolling = { provider: 'auto', providerModules: [evil], drainTimeout: '1m', readyTimeout: '1m', nodes: [] };
          }),
        );
      },
    },
    {
      name: 'apply: plan whose only step is reboot-nodes with a provider module (neither the step list nor the module accepted)',
      code: 5,
      env: STOP,
      message: /its steps \(reboot-nodes\) are not the ones its strategy in-place gives/,
      args: (sb) => {
        const evil = writeIn(sb, 'evil.mjs', `import fs from 'node:fs'; fs.writeFileSync(${JSON.stringify(path.join(sb.cwd, 'PWNED'))}, 'x');\n`);
        return apply(
          planWith(sb, (p) => {
            p.options.rebootNodes = true;
            p.steps = [{ id: 'reboot-nodes', title: 'r', description: 'r' }];
            p.rolling = { provider: 'auto', providerModules: [evil], drainTimeout: '1m', readyTimeout: '1m', nodes: [] };
          }),
        );
      },
    },
    {
      name: 'apply: plan naming a config file not given on the command line',
      code: 5,
      env: STOP,
      message: /would read the config file .* which this apply command line does not give/,
      args: (sb) =>
        apply(
          planWith(sb, (p) => {
            p.options.rebootNodes = true;
            p.steps.push({ id: 'reboot-nodes', title: 'r', description: 'r' });
            p.rolling = { provider: 'auto', providerModules: [], config: '/etc/shadow', drainTimeout: '1m', readyTimeout: '1m', nodes: [] };
          }),
        ),
    },
    // 4. no reads through linked directories
    {
      name: 'doctor: a directory bundle whose resources/ is a link to outside',
      code: 2,
      message: /resources is a symbolic link; a bundle holds only directories and regular files/,
      args: (sb) => [
        'doctor',
        bundleCopy(sb, (d) => {
          const out = path.join(sb.in, 'outside');
          fs.cpSync(path.join(d, 'resources'), out, { recursive: true });
          fs.rmSync(path.join(d, 'resources'), { recursive: true });
          fs.symlinkSync(out, path.join(d, 'resources'));
        }),
      ],
    },
    {
      name: 'diff: a bundle whose resources/<group> is a link to outside',
      code: 2,
      message: /resources\/crd\.projectcalico\.org is a symbolic link/,
      args: (sb) => [
        'diff',
        bundleCopy(sb, (d) => {
          const g = path.join(d, 'resources', 'crd.projectcalico.org');
          const out = path.join(sb.in, 'outside-group');
          fs.cpSync(g, out, { recursive: true });
          fs.rmSync(g, { recursive: true });
          fs.symlinkSync(out, g);
        }),
      ],
    },
    // 5. one line for every failure
    {
      name: 'tar.gz with a file x and a directory x/ (EEXIST)',
      code: 2,
      message: /holds "crds" both as a file and as a directory/,
      args: (sb) => [
        'inspect',
        tgzIn(sb, [manifestEntry(), { name: 'crds', body: 'x' }, { name: 'crds/', type: '5' }, { name: 'crds/a.yaml', body: 'a: 1\n' }]),
      ],
    },
    {
      name: 'tar.gz with a directory x/ and then a file x',
      code: 2,
      message: /holds "crds" both as a file and as a directory/,
      args: (sb) => [
        'verify',
        tgzIn(sb, [manifestEntry(), { name: 'crds/', type: '5' }, { name: 'crds/a.yaml', body: 'a: 1\n' }, { name: 'crds', body: 'x' }]),
      ],
    },
    {
      name: 'manifest nested 5,000 deep (inspect -o yaml, no stack overflow)',
      code: 2,
      message: /manifest\.json is nested deeper than a bundle manifest can be/,
      args: (sb) => ['inspect', '-o', 'yaml', bundleCopy(sb, deepManifest(5000))],
    },
    {
      name: 'manifest nested 100,000 deep in counts (verify)',
      code: 2,
      message: /manifest\.json (is nested deeper|is not valid JSON|has a missing or invalid)/,
      args: (sb) => ['verify', bundleCopy(sb, deepManifest(100_000))],
    },
    {
      name: 'an object at a path of another namespace (doctor refuses it)',
      code: 2,
      message: /holds .* which belongs at/,
      args: (sb) => [
        'doctor',
        bundleCopy(sb, (d, m) => {
          const rel = Object.keys(m.files).find((f) => f.startsWith('resources/crd.projectcalico.org/NetworkPolicy/'))!;
          const other = rel.replace(/NetworkPolicy\/[^/]+\//, 'NetworkPolicy/kube-system/');
          fs.mkdirSync(path.dirname(path.join(d, other)), { recursive: true });
          fs.renameSync(path.join(d, rel), path.join(d, other));
          m.files[other] = m.files[rel];
          delete m.files[rel];
        }),
      ],
    },
    // 7. special files as options
    {
      name: 'status --kubeconfig is a FIFO (no hang)',
      code: 2,
      message: /kubeconfig .* is not a regular file/,
      args: (sb) => ['status', '--kubeconfig', mkfifo(sb, 'kc.fifo')],
    },
    {
      name: 'status --kubeconfig /dev/zero (no hang)',
      code: 2,
      message: /kubeconfig \/dev\/zero is not a regular file/,
      args: () => ['status', '--kubeconfig', '/dev/zero'],
    },
    { name: 'status --kubeconfig is a directory', code: 2, message: /kubeconfig .* is a directory/, args: (sb) => ['status', '--kubeconfig', sb.in] },
    {
      name: 'status --kubeconfig larger than 4 MiB (sparse)',
      code: 2,
      message: /kubeconfig .* is larger than 4194304 bytes/,
      args: (sb) => {
        const f = writeIn(sb, 'big-kc', '');
        fs.truncateSync(f, 64 * 1024 * 1024);
        return ['status', '--kubeconfig', f];
      },
    },
    {
      name: 'export --encryption-key-file is a FIFO (no hang)',
      code: 2,
      message: /encryption key file .* is not a regular file/,
      args: (sb) => ['export', '--encrypt', '--encryption-key-file', mkfifo(sb, 'key.fifo'), '--out', path.join(sb.cwd, 'out')],
    },
    {
      name: 'restore --encryption-key-file /dev/zero (no hang)',
      code: 2,
      message: /encryption key file \/dev\/zero is not a regular file/,
      args: () => ['restore', t.enc, '--resources', '--dry-run', '--encryption-key-file', '/dev/zero'],
    },
    {
      name: 'export --encryption-passphrase-file /dev/zero (no hang)',
      code: 2,
      message: /encryption passphrase file \/dev\/zero is not a regular file/,
      args: (sb) => ['export', '--encrypt', '--encryption-passphrase-file', '/dev/zero', '--out', path.join(sb.cwd, 'out')],
    },
    {
      name: 'apply: the plan file is a FIFO (no hang)',
      code: 2,
      message: /plan file .* is not a regular file/,
      args: (sb) => ['apply', mkfifo(sb, 'plan.fifo'), '--yes'],
    },
    // 8. prototype-named unlisted files
    ...['constructor', 'toString', '__proto__', 'hasOwnProperty'].map((n): Case => ({
      name: `verify: an unlisted file named ${n}`,
      code: 2,
      message: new RegExp(`failed verification: ${n}: not listed in the manifest`),
      args: (sb) => ['verify', bundleCopy(sb, (d) => fs.writeFileSync(path.join(d, n), 'x'))],
    })),
    // 9. authenticated encryption
    {
      name: 'verify (with the key): two encrypted files swapped, checksums fixed',
      code: 2,
      message: /manifest\.json fails its authentication check/,
      env: keyEnv,
      args: (sb) => ['verify', encCopy(sb, (d, m, s) => swap(d, m, s))],
    },
    {
      name: 'restore (with the key): two encrypted files swapped, checksums fixed',
      code: 2,
      message: /manifest\.json fails its authentication check/,
      env: keyEnv,
      args: (sb) => ['restore', encCopy(sb, (d, m, s) => swap(d, m, s)), '--resources', '--dry-run'],
    },
    {
      name: 'restore (with the key): one encrypted Secret file copied over another, checksums fixed',
      code: 2,
      message: /manifest\.json fails its authentication check/,
      env: keyEnv,
      args: (sb) => [
        'restore',
        encCopy(sb, (d, m, [a, b]) => {
          const body = fs.readFileSync(path.join(d, b!));
          fs.writeFileSync(path.join(d, a!), body);
          m.files[a!] = { ...m.files[a!], sha256: sha256(body), size: body.length };
        }),
        '--resources',
        '--dry-run',
      ],
    },
    {
      name: 'verify (with the key): manifest.json of an encrypted bundle edited',
      code: 2,
      message: /manifest\.json fails its authentication check/,
      env: keyEnv,
      args: (sb) => ['verify', encCopy(sb, (_, m) => m.notes.push('edited'))],
    },
    {
      name: 'restore (with the key): manifest.json of an encrypted bundle edited',
      code: 2,
      message: /manifest\.json fails its authentication check/,
      env: keyEnv,
      args: (sb) => ['restore', encCopy(sb, (_, m) => (m.cluster.name = 'elsewhere')), '--resources', '--dry-run'],
    },
    {
      name: 'restore (with the key): MAC removed and format set to 1.0.0, files swapped',
      code: 2,
      message: /cannot decrypt config\/\S+: it is not bound|cannot decrypt config\/\S+: wrong key, the file was altered, or it belongs at another path/,
      env: keyEnv,
      args: (sb) => [
        'restore',
        encCopy(sb, (d, m, s) => {
          m.formatVersion = '1.0.0';
          delete m.encryption.mac;
          swap(d, m, s);
        }),
        '--resources',
        '--dry-run',
      ],
    },
    {
      name: 'restore: a passphrase for a bundle encrypted with a key',
      code: 2,
      message: /is encrypted with a key, not a passphrase/,
      env: { CNI_REWIND_ENCRYPTION_KEY: '', CNI_REWIND_ENCRYPTION_PASSPHRASE: 'a long enough passphrase' },
      args: () => ['restore', t.enc, '--resources', '--dry-run'],
    },
    {
      name: 'export --encryption-passphrase-file with a short passphrase',
      code: 2,
      message: /fewer than 12 characters/,
      args: (sb) => ['export', '--encrypt', '--encryption-passphrase-file', writeIn(sb, 'pass', 'short\n'), '--out', path.join(sb.cwd, 'out')],
    },
    {
      name: 'a ClusterRoleBinding at a Calico object path, checksum fixed (diff refuses it)',
      code: 2,
      message: /holds rbac\.authorization\.k8s\.io\/v1 ClusterRoleBinding/,
      args: (sb) => [
        'diff',
        bundleCopy(sb, (d, m) => {
          const rel = someObject(m);
          const body =
            'apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: pwn}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n';
          fs.writeFileSync(path.join(d, rel), body);
          m.files[rel] = { ...m.files[rel], sha256: sha256(body), size: body.length };
        }),
      ],
    },
  ];
}
