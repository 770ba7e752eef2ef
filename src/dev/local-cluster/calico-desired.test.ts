import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../../kube/types.js';
import { desiredApiServer, desiredKubeControllers, desiredOperator, serviceCidr } from './calico-desired.js';
import { parseUpArgs } from './cli.js';

const deployment = (image: string, replicas?: number, extra: Partial<KubeObject['metadata']> = {}): KubeObject => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name: 'tigera-operator', namespace: 'tigera-operator', ...extra },
  spec: { ...(replicas === undefined ? {} : { replicas }), template: { spec: { containers: [{ name: 'tigera-operator', image }] } } },
});

describe('desiredOperator', () => {
  it('follows the image tag while the Deployment wants a replica', () => {
    expect(desiredOperator(deployment('quay.io/tigera/operator:v1.32.10', 1))).toEqual({ tag: 'v1.32.10' });
    expect(desiredOperator(deployment('quay.io/tigera/operator:v1.34.3'))).toEqual({ tag: 'v1.34.3' });
  });
  it('is stopped when scaled to 0, deleted, absent, or untagged', () => {
    expect(desiredOperator(deployment('quay.io/tigera/operator:v1.34.3', 0))).toBeUndefined();
    expect(desiredOperator(deployment('quay.io/tigera/operator:v1.34.3', 1, { deletionTimestamp: '2026-01-01T00:00:00Z' }))).toBeUndefined();
    expect(desiredOperator(undefined)).toBeUndefined();
    expect(desiredOperator(deployment('quay.io/tigera/operator', 1))).toBeUndefined();
  });
});

describe('desiredApiServer', () => {
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  const dep = deployment('calico/apiserver:v3.28.1', 1);
  const svc = (ip: string): KubeObject => ({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'calico-api' },
    spec: { clusterIP: ip, ports: [{ name: 'apiserver', port: 443, targetPort: 5443 }] },
  });
  const secret = (crt: string): KubeObject => ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'calico-apiserver-certs' },
    data: { 'tls.crt': b64(crt), 'tls.key': b64('KEY') },
  });

  it('serves the Service ClusterIP and port with the secret certificate', () => {
    const d = desiredApiServer(dep, svc('127.1.59.20'), secret('CERT'))!;
    expect(d).toMatchObject({ address: '127.1.59.20', port: 443, cert: 'CERT', key: 'KEY' });
    // A new certificate or address means a restart: the fingerprint changes with them.
    expect(desiredApiServer(dep, svc('127.1.59.20'), secret('CERT2'))!.fingerprint).not.toBe(d.fingerprint);
    expect(desiredApiServer(dep, svc('127.1.59.21'), secret('CERT'))!.fingerprint).not.toBe(d.fingerprint);
    expect(desiredApiServer(dep, svc('127.1.59.20'), secret('CERT'))!.fingerprint).toBe(d.fingerprint);
  });
  it('waits for all three objects and a wanted replica', () => {
    expect(desiredApiServer(undefined, svc('127.1.59.20'), secret('C'))).toBeUndefined();
    expect(desiredApiServer(dep, undefined, secret('C'))).toBeUndefined();
    expect(desiredApiServer(dep, svc('127.1.59.20'), undefined)).toBeUndefined();
    expect(desiredApiServer(dep, svc('None'), secret('C'))).toBeUndefined();
    expect(desiredApiServer(deployment('x:v1', 0), svc('127.1.59.20'), secret('C'))).toBeUndefined();
  });
});

describe('desiredKubeControllers and serviceCidr', () => {
  it('runs kube-controllers while either install wants it', () => {
    expect(desiredKubeControllers([undefined, deployment('calico/kube-controllers:v3.27.4', 1)])).toBe(true);
    expect(desiredKubeControllers([deployment('calico/kube-controllers:v3.27.4', 0), undefined])).toBe(false);
    expect(desiredKubeControllers([undefined, undefined])).toBe(false);
  });
  it('gives each port block its own loopback /24', () => {
    expect(serviceCidr(16443)).toBe('127.1.59.0/24');
    expect(serviceCidr(24443)).toBe('127.1.123.0/24');
  });
});

describe('cluster up options', () => {
  it('parses --calico and --install', () => {
    expect(parseUpArgs([])).toEqual({ calico: undefined, install: 'operator' });
    expect(parseUpArgs(['--calico', '3.27.4', '--install', 'manifest'])).toEqual({ calico: '3.27.4', install: 'manifest' });
    expect(parseUpArgs(['--calico=3.28.1'])).toEqual({ calico: '3.28.1', install: 'operator' });
  });
  it('rejects bad input with one line', () => {
    expect(() => parseUpArgs(['--install', 'helm', '--calico', '3.28.1'])).toThrow('--install takes operator or manifest, not "helm"');
    expect(() => parseUpArgs(['--install', 'operator'])).toThrow('--install needs --calico VERSION');
    expect(() => parseUpArgs(['--calico'])).toThrow('--calico needs a value');
    expect(() => parseUpArgs(['--bogus'])).toThrow('unknown option --bogus');
  });
});
