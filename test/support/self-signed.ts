/** A self-signed certificate for 127.0.0.1 (openssl), for the local HTTPS fakes the tests start. */
import { execFileSync } from 'node:child_process';
import path from 'node:path';

/** Writes `<name>.pem` (the certificate, its own CA) and `<name>.key` into `dir`, valid two days. */
export function selfSignedCert(dir: string, name: string): { caFile: string; keyFile: string } {
  const caFile = path.join(dir, `${name}.pem`);
  const keyFile = path.join(dir, `${name}.key`);
  const subject = ['-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'];
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', caFile, '-days', '2', ...subject], { stdio: 'ignore' });
  return { caFile, keyFile };
}
