/** Bad-input cases: malformed bundle directories. */
import fs from 'node:fs';
import path from 'node:path';
import { sha256, bundleCopy, rawManifest, someObject, rewriteListed, writeIn, type Case } from './bad-input-support.js';

export const bundleDirCases: Case[] = [
  // ---- malformed bundle directories ----
  {
    name: 'manifest.json is not JSON (inspect)',
    code: 2,
    message: /manifest\.json is not valid JSON/,
    args: (sb) => ['inspect', bundleCopy(sb, rawManifest('{"formatVersion": "1.0.0",'))],
  },
  {
    name: 'manifest.json is a JSON array (verify)',
    code: 2,
    message: /manifest\.json is not a bundle manifest/,
    args: (sb) => ['verify', bundleCopy(sb, rawManifest('[1,2,3]'))],
  },
  { name: 'manifest.json is empty (diff)', code: 2, message: /manifest\.json is not valid JSON/, args: (sb) => ['diff', bundleCopy(sb, rawManifest(''))] },
  {
    name: 'manifest.json is YAML, not JSON (restore)',
    code: 2,
    message: /manifest\.json is not valid JSON/,
    args: (sb) => ['restore', bundleCopy(sb, rawManifest('formatVersion: 1.0.0\nid: x\n')), '--resources', '--dry-run'],
  },
  {
    name: 'manifest without formatVersion (inspect)',
    code: 2,
    message: /no valid formatVersion/,
    args: (sb) => ['inspect', bundleCopy(sb, (_, m) => delete m.formatVersion)],
  },
  {
    name: 'formatVersion is not semver (verify)',
    code: 2,
    message: /no valid formatVersion/,
    args: (sb) => ['verify', bundleCopy(sb, (_, m) => (m.formatVersion = 'one'))],
  },
  {
    name: 'newer format major (restore)',
    code: 2,
    message: /format 3\.0\.0, newer than this cni-rewind reads/,
    args: (sb) => ['restore', bundleCopy(sb, (_, m) => (m.formatVersion = '3.0.0')), '--resources', '--dry-run'],
  },
  {
    name: 'newer format major (doctor offline)',
    code: 2,
    message: /format 9\.1\.0, newer than this cni-rewind reads/,
    args: (sb) => ['doctor', bundleCopy(sb, (_, m) => (m.formatVersion = '9.1.0'))],
  },
  {
    name: 'older format major (verify)',
    code: 2,
    message: /format 0\.9\.0, older than this cni-rewind reads/,
    args: (sb) => ['verify', bundleCopy(sb, (_, m) => (m.formatVersion = '0.9.0'))],
  },
  {
    name: 'manifest lists ../../x (inspect)',
    code: 2,
    message: /lists an unsafe file "\.\.\/\.\.\/x" \('\.\.' in path\)/,
    args: (sb) => ['inspect', bundleCopy(sb, (_, m) => (m.files['../../x'] = { sha256: sha256('x'), size: 1 }))],
  },
  {
    name: 'manifest lists an absolute path (verify)',
    code: 2,
    message: /lists an unsafe file "\/etc\/passwd" \(absolute path\)/,
    args: (sb) => ['verify', bundleCopy(sb, (_, m) => (m.files['/etc/passwd'] = { sha256: sha256('x'), size: 1 }))],
  },
  {
    name: 'manifest lists a backslash path (diff)',
    code: 2,
    message: /unsafe file .*backslash/,
    args: (sb) => ['diff', bundleCopy(sb, (_, m) => (m.files['..\\..\\x'] = { sha256: sha256('x'), size: 1 }))],
  },
  {
    name: 'manifest file entry with a bad sha256 (inspect)',
    code: 2,
    message: /invalid entry for/,
    args: (sb) => ['inspect', bundleCopy(sb, (_, m) => (m.files[someObject(m)].sha256 = 'xyz'))],
  },
  {
    name: 'negative count (inspect)',
    code: 2,
    message: /missing or invalid "counts"/,
    args: (sb) => ['inspect', bundleCopy(sb, (_, m) => (m.counts[Object.keys(m.counts)[0]!] = -1))],
  },
  {
    name: 'manifest without cluster identity (restore)',
    code: 2,
    message: /missing or invalid "cluster"/,
    args: (sb) => ['restore', bundleCopy(sb, (_, m) => delete m.cluster), '--resources', '--dry-run'],
  },
  {
    name: 'createdAt is not a date (plan refuses the bundle)',
    code: 5,
    message: /the plan's bundle cannot be used: .*missing or invalid "createdAt"/,
    args: (sb) => ['plan', '--to', '3.27.4', '--bundle', bundleCopy(sb, (_, m) => (m.createdAt = 'yesterday'))],
  },
  { name: 'files is an array (verify)', code: 2, message: /missing or invalid "files"/, args: (sb) => ['verify', bundleCopy(sb, (_, m) => (m.files = []))] },
  {
    name: 'object file is not YAML, checksum fixed (diff)',
    code: 2,
    message: /is not valid YAML/,
    args: (sb) => ['diff', bundleCopy(sb, (d, m) => rewriteListed(d, m, someObject(m), 'spec: [unclosed\n  : : :'))],
  },
  {
    name: 'object file is YAML but not a Kubernetes object (restore)',
    code: 2,
    message: /is not a Kubernetes object/,
    args: (sb) => ['restore', bundleCopy(sb, (d, m) => rewriteListed(d, m, someObject(m), '- just\n- a list\n')), '--resources', '--dry-run'],
  },
  {
    name: 'object file edited, checksum not (verify names it)',
    code: 2,
    message: /problem|verif|checksum|sha256/i,
    args: (sb) => ['verify', bundleCopy(sb, (d, m) => fs.appendFileSync(path.join(d, someObject(m)), '# edited\n'))],
  },
  {
    name: 'object file edited, checksum not (restore refuses it)',
    code: 2,
    message: /does not match its checksum/,
    args: (sb) => ['restore', bundleCopy(sb, (d, m) => fs.appendFileSync(path.join(d, someObject(m)), '# edited\n')), '--resources', '--dry-run'],
  },
  {
    name: 'listed object file missing (diff)',
    code: 2,
    message: /is missing/,
    args: (sb) => ['diff', bundleCopy(sb, (d, m) => fs.rmSync(path.join(d, someObject(m))))],
  },
  {
    name: 'extra file not in the manifest (verify)',
    code: 2,
    message: /problem|verif/i,
    args: (sb) => ['verify', bundleCopy(sb, (d) => fs.writeFileSync(path.join(d, 'resources', 'planted.yaml'), 'x: 1\n'))],
  },
  {
    name: 'object file replaced by a symlink to /etc/passwd (verify)',
    code: 2,
    message: /problem|verif/i,
    args: (sb) => [
      'verify',
      bundleCopy(sb, (d, m) => {
        fs.rmSync(path.join(d, someObject(m)));
        fs.symlinkSync('/etc/passwd', path.join(d, someObject(m)));
      }),
    ],
  },
  {
    name: 'manifest.json is a symlink (inspect)',
    code: 2,
    message: /is not a bundle: it has no manifest\.json/,
    args: (sb) => [
      'inspect',
      bundleCopy(sb, (d, m) => {
        m.__raw = true;
        fs.renameSync(path.join(d, 'manifest.json'), path.join(sb.in, 'real-manifest.json'));
        fs.symlinkSync(path.join(sb.in, 'real-manifest.json'), path.join(d, 'manifest.json'));
      }),
    ],
  },
  {
    name: 'manifest.json is a directory (verify)',
    code: 2,
    message: /is not a bundle: it has no manifest\.json/,
    args: (sb) => [
      'verify',
      bundleCopy(sb, (d, m) => {
        m.__raw = true;
        fs.rmSync(path.join(d, 'manifest.json'));
        fs.mkdirSync(path.join(d, 'manifest.json'));
      }),
    ],
  },
  {
    name: 'huge (sparse 600 MB) manifest.json (inspect)',
    code: 2,
    message: /implausibly large/,
    args: (sb) => [
      'inspect',
      bundleCopy(sb, (d, m) => {
        m.__raw = true;
        fs.truncateSync(path.join(d, 'manifest.json'), 600 * 1024 * 1024);
      }),
    ],
  },
  { name: 'bundle marked incomplete (verify)', code: 2, message: /problem|verif/i, args: (sb) => ['verify', bundleCopy(sb, (_, m) => (m.complete = false))] },
  {
    name: 'counts disagree with the files (verify)',
    code: 2,
    message: /problem|verif/i,
    args: (sb) => [
      'verify',
      bundleCopy(sb, (_, m) => {
        const r = m.resources.find((x: any) => x.count > 0);
        r.count += 5;
        m.counts[r.key] = r.count;
      }),
    ],
  },
  {
    name: 'an empty directory is not a bundle (inspect)',
    code: 2,
    message: /is not a bundle: it has no manifest\.json/,
    args: (sb) => ['inspect', fs.mkdtempSync(path.join(sb.in, 'empty-'))],
  },
  {
    name: 'a directory of random files is not a bundle (verify)',
    code: 2,
    message: /is not a bundle: it has no manifest\.json/,
    args: (sb) => {
      writeIn(sb, 'junk/a.yaml', 'a: 1');
      return ['verify', path.join(sb.in, 'junk')];
    },
  },
  { name: 'no such bundle (inspect)', code: 2, message: /no such bundle/, args: (sb) => ['inspect', path.join(sb.in, 'does-not-exist')] },
  {
    name: 'a plain text file is not a bundle (verify)',
    code: 2,
    message: /is not a bundle \(not a directory and not a gzip/,
    args: (sb) => ['verify', writeIn(sb, 'notes.txt', 'hello')],
  },
  { name: 'a device is not a bundle (inspect /dev/null)', code: 2, message: /not a bundle/, args: () => ['inspect', '/dev/null'] },
  {
    name: 'doctor on a directory that is not a bundle',
    code: 2,
    message: /is not a bundle: it has no manifest\.json/,
    args: (sb) => ['doctor', fs.mkdtempSync(path.join(sb.in, 'nb-'))],
  },
];
