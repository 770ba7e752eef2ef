/**
 * Issue 32 cases: the backups location is hostile ground. Nothing a bundle's manifest says decides what code runs
 * (a provider named by a `data:` URL), and an encrypted bundle cannot be passed off as a plain or unauthenticated
 * one while a key is given. Run by bad-input.test.ts with its sandbox checks (nothing written, one error line).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Case, Sandbox } from './bad-input-support.js';
import type { TrustHelpers } from './trust-cases.js';

export function storageCases(c: TrustHelpers): Case[] {
  const { t, bundleCopy, encCopy, keyEnv, relabelLegacy, mkfifo, writeIn } = c;
  /**
   * A backups folder in the sandbox: a real bundle (newest) and an older copy whose manifest records a snapshot of
   * a "provider" that is a `data:` URL module writing a file into the sandbox, were it ever imported.
   */
  const plantedProviderFolder = (sb: Sandbox) => {
    const dir = path.join(sb.in, 'backups');
    fs.mkdirSync(dir);
    const proof = path.join(sb.in, 'provider-module-ran');
    const provider = `data:text/javascript,import{writeFileSync}from'node:fs';writeFileSync(${JSON.stringify(proof)},'');export default {}`;
    const planted = bundleCopy(sb, (_, m) => {
      m.snapshots = [{ provider, node: 'n1', machine: 'm1', disk: 'd1', device: 'sda', snapshotId: 'snap-1', state: 'completed', created: m.createdAt }];
    });
    fs.renameSync(planted, path.join(dir, 'old'));
    const yesterday = new Date(Date.now() - 86_400_000);
    fs.utimesSync(path.join(dir, 'old', 'manifest.json'), yesterday, yesterday);
    fs.renameSync(
      bundleCopy(sb, () => {}),
      path.join(dir, 'new'),
    );
    return dir;
  };
  return [
    {
      name: 'prune --snapshots: a manifest naming its provider as a data: URL module (never imported, the bundle kept)',
      code: 3,
      message: /could not be deleted: .*unknown provider 'data:text\/javascript/,
      args: (sb) => ['prune', plantedProviderFolder(sb), '--keep-last', '1', '--snapshots'],
    },
    {
      name: 'verify (with the key): the encryption record of an encrypted bundle deleted',
      code: 2,
      message: /is not encrypted, but a key was given/,
      env: keyEnv,
      args: (sb) => ['verify', encCopy(sb, (_, m) => delete m.encryption)],
    },
    {
      name: 'verify (with the key): an encrypted bundle relabelled 1.0.0 with its MAC dropped',
      code: 2,
      message: /manifest\.json of this encrypted bundle carries no authentication code/,
      env: keyEnv,
      args: (sb) => ['verify', encCopy(sb, (_, m) => relabelLegacy(m))],
    },
    {
      name: 'prune --snapshots --config naming a FIFO (no hang)',
      code: 2,
      message: /cannot read config file .*: is not a regular file/,
      args: (sb) => ['prune', sb.in, '--keep-last', '1', '--snapshots', '--config', mkfifo(sb, 'config.yaml')],
    },
    {
      name: 'status with a kubeconfig whose certificate-authority is a FIFO (no hang)',
      code: 2,
      message: /the kubeconfig's certificate-authority .* is not a regular file/,
      args: (sb) => {
        const ca = mkfifo(sb, 'ca.pem');
        const kubeconfig = {
          apiVersion: 'v1',
          kind: 'Config',
          'current-context': 'c',
          clusters: [{ name: 'k', cluster: { server: 'https://127.0.0.1:1', 'certificate-authority': ca } }],
          users: [{ name: 'u', user: { token: 't' } }],
          contexts: [{ name: 'c', context: { cluster: 'k', user: 'u' } }],
        };
        return ['status', '--kubeconfig', writeIn(sb, 'kc.yaml', JSON.stringify(kubeconfig))];
      },
    },
    {
      name: 'plan --manifests whose tigera-operator.yaml is a FIFO (no hang)',
      code: 2,
      message: /release manifest .*tigera-operator\.yaml is not a regular file/,
      args: (sb) => {
        fs.mkdirSync(path.join(sb.in, 'rel'));
        mkfifo(sb, 'rel/tigera-operator.yaml');
        return [
          'plan',
          '--to',
          '3.27.4',
          '--manifests',
          path.join(sb.in, 'rel'),
          '--bundle',
          t.base,
          '--no-disk-snapshots',
          '--out',
          path.join(sb.cwd, 'p.json'),
        ];
      },
    },
    {
      name: 'verify (with a passphrase): scrypt parameters above what the tool writes',
      code: 2,
      message: /scrypt parameters are out of bounds \(N 65536, r 8, p 1/,
      env: { CNI_REWIND_ENCRYPTION_KEY: '', CNI_REWIND_ENCRYPTION_PASSPHRASE: 'a long enough passphrase' },
      args: (sb) => [
        'verify',
        encCopy(sb, (_, m) => {
          m.encryption = { ...m.encryption, kdf: 'scrypt', salt: Buffer.alloc(16, 7).toString('base64'), scrypt: { N: 65536, r: 8, p: 1 } };
        }),
      ],
    },
  ];
}
