import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** A fresh CA, API server cert, admin client cert and service-account key pair, made with openssl. */
export function makePki(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const run = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  /** Sign NAME.csr with the CA into NAME.crt, valid ten years, with the extensions in extfile. */
  const sign = (name: string, ca: string, extfile: string) =>
    run([
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      `${ca}.crt`,
      '-CAkey',
      `${ca}.key`,
      '-CAcreateserial',
      '-days',
      '3650',
      '-extfile',
      extfile,
      '-out',
      `${name}.crt`,
    ]);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  run(['req', '-x509', ...ec, '-days', '3650', '-subj', '/CN=e2e-ca', '-keyout', 'ca.key', '-out', 'ca.crt']);
  writeFileSync(
    path.join(dir, 'srv.ext'),
    [
      'basicConstraints=CA:FALSE',
      'keyUsage=critical,digitalSignature,keyEncipherment',
      'extendedKeyUsage=serverAuth',
      'subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local',
    ].join('\n') + '\n',
  );
  run(['req', ...ec, '-subj', '/CN=kube-apiserver', '-keyout', 'apiserver.key', '-out', 'apiserver.csr']);
  sign('apiserver', 'ca', 'srv.ext');
  writeFileSync(path.join(dir, 'cli.ext'), 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n');
  run(['req', ...ec, '-subj', '/O=system:masters/CN=e2e-admin', '-keyout', 'admin.key', '-out', 'admin.csr']);
  sign('admin', 'ca', 'cli.ext');
  run(['genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-out', 'sa.key']);
  run(['pkey', '-in', 'sa.key', '-pubout', '-out', 'sa.pub']);
  // The aggregation layer: kube-apiserver proxies to aggregated API servers (Calico's projectcalico.org/v3) with
  // this client cert, and they trust the user headers it sends because of this separate CA.
  run(['req', '-x509', ...ec, '-days', '3650', '-subj', '/CN=e2e-front-proxy-ca', '-keyout', 'front-proxy-ca.key', '-out', 'front-proxy-ca.crt']);
  run(['req', ...ec, '-subj', '/CN=front-proxy-client', '-keyout', 'front-proxy-client.key', '-out', 'front-proxy-client.csr']);
  sign('front-proxy-client', 'front-proxy-ca', 'cli.ext');
}

export function writeKubeconfig(file: string, pkiDir: string, server: string, name = 'e2e'): void {
  const b64 = (f: string) => readFileSync(path.join(pkiDir, f)).toString('base64');
  const text = `apiVersion: v1
kind: Config
clusters:
- name: ${name}
  cluster:
    server: ${server}
    certificate-authority-data: ${b64('ca.crt')}
users:
- name: ${name}-admin
  user:
    client-certificate-data: ${b64('admin.crt')}
    client-key-data: ${b64('admin.key')}
contexts:
- name: ${name}
  context:
    cluster: ${name}
    user: ${name}-admin
current-context: ${name}
`;
  writeFileSync(file, text, { mode: 0o600 });
}
