/** Bad-input cases: hostile archives, plan files, config and mapping files, providers, wrong flags. */
import fs from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { expect } from 'vitest';
import { bundleEntries, base, baseTgz, ABS_TARGET, bundleCopy, writeIn, tgzIn, manifestEntry, planSkeleton, type Case } from './bad-input-support.js';

export const otherInputCases: Case[] = [
  // ---- hostile archives ----
  {
    name: 'tar.gz with ../../x (inspect)',
    code: 2,
    message: /unsafe entry "\.\.\/\.\.\/x" \('\.\.' in path\)/,
    args: (sb) => ['inspect', tgzIn(sb, [manifestEntry(), { name: '../../x', body: 'pwned' }])],
  },
  {
    name: 'tar.gz with ./../../x (restore)',
    code: 2,
    message: /unsafe entry/,
    args: (sb) => ['restore', tgzIn(sb, [manifestEntry(), { name: './../../x', body: 'pwned' }]), '--resources', '--dry-run'],
  },
  {
    name: 'tar.gz with resources/../../../x (verify)',
    code: 2,
    message: /unsafe entry/,
    args: (sb) => ['verify', tgzIn(sb, [manifestEntry(), { name: 'resources/../../../x', body: 'pwned' }])],
  },
  {
    name: 'tar.gz with an absolute path (verify)',
    code: 2,
    message: /unsafe entry .*absolute path/,
    args: (sb) => ['verify', tgzIn(sb, [manifestEntry(), { name: ABS_TARGET, body: 'pwned' }])],
    after: () => expect(fs.existsSync(ABS_TARGET)).toBe(false),
  },
  {
    name: 'tar.gz with a backslash path (diff)',
    code: 2,
    message: /unsafe entry .*backslash/,
    args: (sb) => ['diff', tgzIn(sb, [manifestEntry(), { name: '..\\..\\x', body: 'pwned' }])],
  },
  {
    name: 'tar.gz with a symlink to / (inspect)',
    code: 2,
    message: /SymbolicLink entry "crds"/,
    args: (sb) => ['inspect', tgzIn(sb, [manifestEntry(), { name: 'crds', type: '2', linkname: '/' }, { name: 'crds/x.yaml', body: 'pwned' }])],
  },
  {
    name: 'tar.gz with a symlink to ../../ (doctor)',
    code: 2,
    message: /SymbolicLink entry/,
    args: (sb) => ['doctor', tgzIn(sb, [manifestEntry(), { name: 'up', type: '2', linkname: '../../' }, { name: 'up/x', body: 'pwned' }])],
  },
  {
    name: 'tar.gz with a hard link to /etc/passwd (verify)',
    code: 2,
    message: /Link entry "passwd"/,
    args: (sb) => ['verify', tgzIn(sb, [manifestEntry(), { name: 'passwd', type: '1', linkname: '/etc/passwd' }])],
  },
  {
    name: 'tar.gz with a character device (inspect)',
    code: 2,
    message: /CharacterDevice entry/,
    args: (sb) => ['inspect', tgzIn(sb, [manifestEntry(), { name: 'zero', type: '3' }])],
  },
  { name: 'tar.gz with a FIFO (verify)', code: 2, message: /FIFO entry/, args: (sb) => ['verify', tgzIn(sb, [manifestEntry(), { name: 'pipe', type: '6' }])] },
  {
    name: 'tar.gz whose header claims an 8 GB file (inspect)',
    code: 2,
    message: /larger than a bundle may be|truncated/,
    args: (sb) => ['inspect', tgzIn(sb, [manifestEntry(), { name: 'crds/huge.yaml', body: 'x', claimedSize: 8 * 1024 ** 3 - 1 }])],
  },
  {
    name: 'gzip bomb: 80 MB of zeros in one entry (verify)',
    code: 2,
    message: /larger than a bundle may be|decompression|ratio/i,
    args: (sb) => ['verify', tgzIn(sb, [manifestEntry(), { name: 'crds/zeros.yaml', body: Buffer.alloc(80 * 1024 * 1024) }])],
  },
  {
    name: 'truncated tar.gz written by the tool (verify)',
    code: 2,
    message: /truncated|not a valid gzip/,
    args: (sb) => {
      const full = fs.readFileSync(baseTgz);
      return ['verify', writeIn(sb, 'trunc.tar.gz', full.subarray(0, Math.floor(full.length / 2)))];
    },
  },
  {
    name: 'truncated tar.gz (restore)',
    code: 2,
    message: /truncated|not a valid gzip/,
    args: (sb) => {
      const full = fs.readFileSync(baseTgz);
      return ['restore', writeIn(sb, 'trunc.tar.gz', full.subarray(0, full.length - 100)), '--resources', '--dry-run'];
    },
  },
  {
    name: 'gzip of garbage, not tar (inspect)',
    code: 2,
    message: /cannot be read as a bundle archive|not a valid|truncated|not a bundle/,
    args: (sb) => ['inspect', writeIn(sb, 'g.tar.gz', gzipSync(Buffer.from('this is not a tar archive at all '.repeat(100))))],
  },
  {
    name: 'gzip magic followed by garbage (verify)',
    code: 2,
    message: /not a valid gzip|truncated|cannot be read/,
    args: (sb) => ['verify', writeIn(sb, 'm.tar.gz', Buffer.concat([Buffer.from([0x1f, 0x8b]), Buffer.from('garbage'.repeat(50))]))],
  },
  {
    name: 'tar.gz listing manifest.json twice (inspect)',
    code: 2,
    message: /lists manifest\.json twice/,
    args: (sb) => ['inspect', tgzIn(sb, [manifestEntry(), manifestEntry()])],
  },
  {
    name: 'tar.gz without manifest.json (verify)',
    code: 2,
    message: /is not a bundle: it has no manifest\.json/,
    args: (sb) => [
      'verify',
      tgzIn(sb, [
        { name: 'crds/', type: '5' },
        { name: 'crds/a.yaml', body: 'a: 1\n' },
      ]),
    ],
  },
  {
    name: 'tar.gz with the bundle one directory down (inspect)',
    code: 2,
    message: /is not a bundle: it has no manifest\.json/,
    args: (sb) => [
      'inspect',
      tgzIn(
        sb,
        bundleEntries(base).map((e) => ({ ...e, name: `nested/${e.name}` })),
      ),
    ],
  },
  {
    name: 'tar.gz of a newer format major (restore)',
    code: 2,
    message: /format 3\.0\.0, newer/,
    args: (sb) => {
      const m = JSON.parse(fs.readFileSync(path.join(base, 'manifest.json'), 'utf8'));
      return [
        'restore',
        tgzIn(sb, [{ name: 'manifest.json', body: JSON.stringify({ ...m, formatVersion: '3.0.0' }) }, ...bundleEntries(base).slice(1)]),
        '--resources',
        '--dry-run',
      ];
    },
  },
  {
    name: 'tar.gz with an edited object (verify names the file)',
    code: 2,
    message: /problem|verif/i,
    args: (sb) => {
      const es = bundleEntries(base);
      const e = es.find((x) => x.name.includes('/IPPool/') && x.name.endsWith('.yaml'))!;
      e.body = Buffer.concat([Buffer.from(e.body!), Buffer.from('# edited\n')]);
      return ['verify', tgzIn(sb, es)];
    },
  },

  // ---- plan files (apply) and plan flags ----
  { name: 'apply: no such plan file', code: 2, message: /no such plan file/, args: (sb) => ['apply', path.join(sb.in, 'nope.yaml'), '--yes'] },
  { name: 'apply: plan file is not YAML', code: 2, message: /is not a plan/, args: (sb) => ['apply', writeIn(sb, 'p.yaml', 'steps: [\n  {: :'), '--yes'] },
  {
    name: 'apply: YAML of another kind',
    code: 2,
    message: /is not a cni-rewind plan/,
    args: (sb) => ['apply', writeIn(sb, 'p.yaml', 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n'), '--yes'],
  },
  {
    name: 'apply: plan without steps',
    code: 2,
    message: /the plan has no steps|is not a cni-rewind plan/,
    args: (sb) => ['apply', writeIn(sb, 'p.json', JSON.stringify({ ...planSkeleton(), steps: undefined })), '--yes'],
  },
  {
    name: 'apply: plan id with path separators',
    code: 2,
    message: /is not a plain name|is not a cni-rewind plan/,
    args: (sb) => ['apply', writeIn(sb, 'p.json', JSON.stringify({ ...planSkeleton(), id: '../../etc/cron.d/x' })), '--yes'],
  },
  { name: 'apply: plan is a directory', code: 2, message: /no such plan file|not a plan|plan file .* is a directory/, args: (sb) => ['apply', sb.in, '--yes'] },
  { name: 'plan: --to is not a version', code: 2, message: /version|X\.Y\.Z/i, args: () => ['plan', '--to', 'latest'] },
  {
    name: 'plan: --manifests folder does not exist',
    code: 2,
    message: /manifests|not found|no such/i,
    args: (sb) => ['plan', '--to', '3.29.9', '--manifests', path.join(sb.in, 'nope'), '--bundle', path.join(sb.in, 'nob')],
  },
  {
    name: 'plan: --bundle does not exist (refused)',
    code: 5,
    message: /the plan's bundle cannot be used: .*no such bundle/,
    args: (sb) => ['plan', '--to', '3.27.4', '--bundle', path.join(sb.in, 'nope')],
  },
  {
    name: 'plan: --max-backup-age is not a duration',
    code: 2,
    message: /is not a duration/,
    args: () => ['plan', '--to', '3.27.4', '--bundle', base, '--max-backup-age', 'banana'],
  },
  { name: 'plan: --strategy not a choice', code: 2, message: /Invalid values|strategy/, args: () => ['plan', '--to', '3.28.1', '--strategy', 'yolo'] },
  {
    name: 'plan: --migrate-datastore with --to (a migration keeps the release)',
    code: 2,
    message: /--migrate-datastore keeps the release/,
    args: () => ['plan', '--migrate-datastore', '--to', '3.29.7'],
  },
  {
    name: 'plan: --migrate-datastore on the Kubernetes datastore',
    code: 2,
    message: /Kubernetes datastore already/,
    args: () => ['plan', '--migrate-datastore', '--bundle', base],
  },

  // ---- config, mapping, providers (backup) ----
  {
    name: 'backup: --config does not exist',
    code: 2,
    message: /cannot read config file/,
    args: (sb) => ['backup', '--config', path.join(sb.in, 'nope.yaml'), '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'backup: --config is not YAML',
    code: 2,
    message: /is not valid YAML/,
    args: (sb) => ['backup', '--config', writeIn(sb, 'c.yaml', 'providers: {aws: [\n'), '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'backup: --config with an unknown key',
    code: 2,
    message: /unknown key\(s\) pwn/,
    args: (sb) => ['backup', '--config', writeIn(sb, 'c.yaml', 'pwn: 1\n'), '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'backup: --config backup.concurrency not a positive integer',
    code: 2,
    message: /backup\.concurrency must be a positive integer/,
    args: (sb) => ['backup', '--config', writeIn(sb, 'c.yaml', 'backup: {concurrency: -4}\n'), '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'backup: --mapping is a list',
    code: 2,
    message: /node mapping must be a YAML map/,
    args: (sb) => ['backup', '--mapping', writeIn(sb, 'm.yaml', '- a\n- b\n'), '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'backup: --mapping nodes entry not a map',
    code: 2,
    message: /must be a map of provider keys/,
    args: (sb) => ['backup', '--mapping', writeIn(sb, 'm.yaml', 'nodes:\n  n1: 42\n'), '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'backup: --mapping does not exist',
    code: 2,
    message: /cannot read node mapping file/,
    args: (sb) => ['backup', '--mapping', path.join(sb.in, 'nope.yaml'), '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'backup: unknown provider',
    code: 2,
    message: /unknown provider 'nosuchcloud'/,
    args: (sb) => ['backup', '--provider', 'nosuchcloud', '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'backup: --provider-module that does not exist',
    code: 2,
    message: /provider module .* not found/,
    args: (sb) => ['backup', '--provider-module', path.join(sb.in, 'nope.mjs'), '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'backup: --provider-module with a syntax error',
    code: 2,
    message: /failed to load/,
    args: (sb) => ['backup', '--provider-module', writeIn(sb, 'broken.mjs', 'export default {{{;\n'), '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'backup: --provider-module that throws on import',
    code: 2,
    message: /failed to load: boom at import/,
    args: (sb) => ['backup', '--provider-module', writeIn(sb, 'throws.mjs', 'throw new Error("boom at import");\n'), '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'backup: --provider-module exporting no provider',
    code: 2,
    message: /exports no provider|is not a valid cni-rewind provider: apiVersion is missing/,
    args: (sb) => ['backup', '--provider-module', writeIn(sb, 'empty.mjs', 'export const x = 1;\n'), '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'backup: --provider-module of a future provider API',
    code: 2,
    message: /is not a valid cni-rewind provider/,
    args: (sb) => [
      'backup',
      '--provider-module',
      writeIn(sb, 'future.mjs', 'export default { apiVersion: "cni-rewind.io/provider/v99", name: "f", create() { return {}; } };\n'),
      '--out',
      path.join(sb.cwd, 'out'),
    ],
  },
  {
    name: 'backup: --snapshot-timeout is not a duration',
    code: 2,
    message: /is not a duration/,
    args: (sb) => ['backup', '--snapshot-timeout', 'soon', '--out', path.join(sb.cwd, 'out')],
  },

  // ---- wrong flags and values ----
  { name: 'unknown command', code: 2, message: /Unknown argument|Did you mean|unknown/i, args: () => ['exprot'] },
  { name: 'unknown flag', code: 2, message: /Unknown argument/i, args: () => ['inspect', base, '--frobnicate'] },
  {
    name: 'a single-value flag given twice',
    code: 2,
    message: /--drain-timeout was given more than once/,
    args: () => ['plan', '--to', '3.27.4', '--bundle', base, '--reboot-nodes', '--drain-timeout', '1m', '--drain-timeout', '2m'],
  },
  {
    name: 'plan --reboot-nodes --drain-timeout is not a duration',
    code: 2,
    message: /--drain-timeout.*not a duration|is not a duration/,
    args: () => ['plan', '--to', '3.27.4', '--bundle', base, '--reboot-nodes', '--no-disk-snapshots', '--drain-timeout', 'soon'],
  },
  { name: '-o with an unknown format', code: 2, message: /Invalid values/, args: () => ['inspect', base, '-o', 'xml'] },
  { name: 'inspect without a bundle', code: 2, message: /Not enough non-option arguments|bundle/i, args: () => ['inspect'] },
  { name: 'restore with neither --resources nor --disks', code: 2, message: /--resources|--disks/, args: () => ['restore', base] },
  { name: 'restore --existing not a choice', code: 2, message: /Invalid values/, args: () => ['restore', base, '--resources', '--existing', 'merge'] },
  {
    name: 'restore --kinds with an unknown kind',
    code: 2,
    message: /NoSuchKind/,
    args: () => ['restore', base, '--resources', '--dry-run', '--kinds', 'NoSuchKind'],
  },
  { name: 'diff --kinds with an unknown kind', code: 2, message: /NoSuchKind/, args: () => ['diff', base, '--kinds', 'NoSuchKind'] },
  { name: 'doctor --target is not a version', code: 2, message: /version|X\.Y\.Z/i, args: () => ['doctor', base, '--target', 'banana'] },
  { name: 'list on a file instead of a directory', code: 2, message: /not a directory|directory/, args: (sb) => ['list', writeIn(sb, 'f.txt', 'x')] },
  { name: 'export --out that already exists', code: 2, message: /already exists/, args: () => ['export', '--out', base] },
  {
    name: 'export --out under a regular file',
    code: 2,
    message: /not a directory|cannot|ENOTDIR/i,
    args: (sb) => ['export', '--out', path.join(writeIn(sb, 'file', 'x'), 'b')],
  },
  // The kubeconfig is part of the environment (README: exit 4), like the cluster it names: a file that is missing
  // or cannot be read is an environment error; one that is read but is not a kubeconfig is bad input (2).
  {
    name: 'export --kubeconfig that does not exist (environment)',
    code: 4,
    message: /kubeconfig not found/i,
    args: (sb) => ['export', '--kubeconfig', path.join(sb.in, 'nokc'), '--out', path.join(sb.cwd, 'out')],
  },
  {
    name: 'status with KUBECONFIG naming only missing files and no ~/.kube/config (environment)',
    code: 4,
    message: /kubeconfig not found/i,
    env: { KUBECONFIG: '/nonexistent-cni-rewind-tests/config', HOME: '/nonexistent-cni-rewind-tests' },
    args: () => ['status'],
  },
  {
    name: 'diff --kubeconfig that does not exist (environment)',
    code: 4,
    message: /kubeconfig not found/i,
    args: (sb) => ['diff', base, '--kubeconfig', path.join(sb.in, 'gone', 'config')],
  },
  {
    name: 'status --kubeconfig that is not YAML',
    code: 2,
    message: /kubeconfig/i,
    args: (sb) => ['status', '--kubeconfig', writeIn(sb, 'kc', 'clusters: [\n')],
  },
  {
    name: 'export against an unreachable API server (environment)',
    code: 4,
    message: /cannot reach the Kubernetes API server/,
    env: { CNI_REWIND_KUBE_RETRY_MS: '500' },
    args: (sb) => [
      'export',
      '--out',
      path.join(sb.cwd, 'out'),
      '--kubeconfig',
      writeIn(
        sb,
        'kc',
        `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: abcdefgh}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n`,
      ),
    ],
  },
  {
    name: 'restore of a bundle from another cluster (refused)',
    code: 5,
    message: /another cluster|other cluster|different cluster/i,
    args: (sb) => ['restore', bundleCopy(sb, (_, m) => (m.cluster.uid = '00000000-0000-0000-0000-000000000000')), '--resources', '--yes'],
  },
];
