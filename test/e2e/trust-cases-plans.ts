/** Trust cases 1-3: journals, plans re-checked on apply, plans that cannot make apply import code. */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Case } from './bad-input-support.js';
import type { TrustHelpers } from './trust-cases.js';

export function planAndJournalCases(c: TrustHelpers): Case[] {
  const { bundleCopy, writeIn, sha256, planWith, planInSandbox, STOP, apply } = c;
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
  ];
}
