/** Trust cases 4-9: linked directories, one line per failure, special files as options, prototype-named files, authenticated encryption. */
import fs from 'node:fs';
import path from 'node:path';
import type { Case } from './bad-input-support.js';
import type { TrustHelpers } from './trust-cases.js';

export function fileAndKeyCases(c: TrustHelpers): Case[] {
  const { t, bundleCopy, writeIn, tgzIn, manifestEntry, someObject, sha256, mkfifo, encCopy, swap, keyEnv, relabelLegacy, deepManifest } = c;
  return [
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
      code: 4,
      message: /kubeconfig .* is not a regular file/,
      args: (sb) => ['status', '--kubeconfig', mkfifo(sb, 'kc.fifo')],
    },
    {
      name: 'status --kubeconfig /dev/zero (no hang)',
      code: 4,
      message: /kubeconfig \/dev\/zero is not a regular file/,
      args: () => ['status', '--kubeconfig', '/dev/zero'],
    },
    { name: 'status --kubeconfig is a directory', code: 4, message: /kubeconfig .* is a directory/, args: (sb) => ['status', '--kubeconfig', sb.in] },
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
      message: /manifest\.json of this encrypted bundle carries no authentication code/,
      env: keyEnv,
      args: (sb) => [
        'restore',
        encCopy(sb, (d, m, s) => {
          relabelLegacy(m);
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
