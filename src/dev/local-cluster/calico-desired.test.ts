import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../../kube/types.js';
import { desiredApiServer, desiredKubeControllers, desiredOperator, OPERATOR_POD_FINALIZER, operatorPodActions, serviceCidr } from './calico-desired.js';
import { calicoProgramsFor } from './calico-programs.js';
import { parseUpArgs } from './cli.js';

const deployment = (image: string, replicas?: number, extra: Partial<KubeObject['metadata']> = {}): KubeObject => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name: 'tigera-operator', namespace: 'tigera-operator', ...extra },
  spec: { ...(replicas === undefined ? {} : { replicas }), template: { spec: { containers: [{ name: 'tigera-operator', image }] } } },
});

describe('desiredOperator', () => {
  it('follows the image tag while the Deployment wants a replica', () => {
    expect(desiredOperator(deployment('quay.io/tigera/operator:v1.32.10', 1))).toEqual({ tag: 'v1.32.10', args: [] });
    expect(desiredOperator(deployment('quay.io/tigera/operator:v1.34.3'))).toEqual({ tag: 'v1.34.3', args: [] });
  });
  it("passes the container's args as released (3.30: the operator manages the CRDs)", () => {
    const d = deployment('quay.io/tigera/operator:v1.38.13', 1);
    d.spec.template.spec.containers[0].args = ['-manage-crds=true'];
    expect(desiredOperator(d)).toEqual({ tag: 'v1.38.13', args: ['-manage-crds=true'] });
  });
  it('is stopped when scaled to 0, deleted, absent, or untagged', () => {
    expect(desiredOperator(deployment('quay.io/tigera/operator:v1.34.3', 0))).toBeUndefined();
    expect(desiredOperator(deployment('quay.io/tigera/operator:v1.34.3', 1, { deletionTimestamp: '2026-01-01T00:00:00Z' }))).toBeUndefined();
    expect(desiredOperator(undefined)).toBeUndefined();
    expect(desiredOperator(deployment('quay.io/tigera/operator', 1))).toBeUndefined();
    const terminating: KubeObject = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'tigera-operator', deletionTimestamp: '2026-01-01T00:00:00Z' } };
    expect(desiredOperator(deployment('quay.io/tigera/operator:v1.34.3', 1), terminating)).toBeUndefined();
    expect(desiredOperator(deployment('quay.io/tigera/operator:v1.34.3', 1), { ...terminating, metadata: { name: 'tigera-operator' } })).toEqual({
      tag: 'v1.34.3',
      args: [],
    });
  });
});

describe('operatorPodActions', () => {
  const pod = (name: string, tag: string, opts: { going?: boolean; held?: boolean } = {}): KubeObject => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: 'tigera-operator',
      ...(opts.going ? { deletionTimestamp: '2026-01-01T00:00:00Z' } : {}),
      ...(opts.held ? { finalizers: [OPERATOR_POD_FINALIZER] } : {}),
    },
    spec: { containers: [{ name: 'tigera-operator', image: `quay.io/tigera/operator:${tag}` }] },
  });
  const names = (pods: KubeObject[]) => pods.map((p) => p.metadata.name);

  it('holds live operator pods not held yet, and nothing else in the namespace', () => {
    const other: KubeObject = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'x' }, spec: { containers: [{ name: 'sidecar', image: 'busybox' }] } };
    const act = operatorPodActions([pod('a', 'v1.34.3'), pod('b', 'v1.34.3', { held: true }), other], 'v1.34.3');
    expect(act).toEqual({ stop: false, release: [], hold: [expect.objectContaining({ metadata: expect.objectContaining({ name: 'a' }) })] });
  });
  it('scaled to 0: the process of the going pods stops, and only then are they released', () => {
    const act = operatorPodActions([pod('a', 'v1.34.3', { going: true, held: true }), pod('b', 'v1.34.3', { going: true, held: true })], 'v1.34.3');
    expect(act.stop).toBe(true);
    expect(names(act.release)).toEqual(['a', 'b']);
  });
  it('a pod replaced by another live pod of the same tag keeps the process running', () => {
    const act = operatorPodActions([pod('a', 'v1.34.3', { going: true, held: true }), pod('c', 'v1.34.3', { held: true })], 'v1.34.3');
    expect(act).toMatchObject({ stop: false, hold: [] });
    expect(names(act.release)).toEqual(['a']);
  });
  it("a rolling update's old pod does not stop the new tag's process", () => {
    const act = operatorPodActions([pod('old', 'v1.32.10', { going: true, held: true }), pod('new', 'v1.34.3')], 'v1.34.3');
    expect(act.stop).toBe(false);
    expect(names(act.release)).toEqual(['old']);
    expect(names(act.hold)).toEqual(['new']);
  });
  it('nothing running: going pods are released, a pod without the finalizer is left alone', () => {
    const act = operatorPodActions([pod('a', 'v1.34.3', { going: true, held: true }), pod('b', 'v1.34.3', { going: true })], undefined);
    expect(act.stop).toBe(false);
    expect(names(act.release)).toEqual(['a']);
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
    expect(d).toMatchObject({ address: '127.1.59.20', port: 443, tag: 'v3.28.1', cert: 'CERT', key: 'KEY' });
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
    expect(desiredKubeControllers([undefined, deployment('calico/kube-controllers:v3.27.4', 1)])).toEqual({ tag: 'v3.27.4' });
    expect(desiredKubeControllers([deployment('calico/kube-controllers:v3.27.4', 0), undefined])).toBeUndefined();
    expect(desiredKubeControllers([undefined, undefined])).toBeUndefined();
  });
  it('gives each port block its own loopback /24', () => {
    expect(serviceCidr(16443)).toBe('127.1.59.0/24');
    expect(serviceCidr(24443)).toBe('127.1.123.0/24');
  });
});

describe('calicoProgramsFor', () => {
  it("serves each installed release with its own tree, and a patch release no test installs with its minor's", () => {
    expect(calicoProgramsFor('v3.30.7')).toBe('v3.30.7');
    expect(calicoProgramsFor('v3.30.2')).toBe('v3.30.7');
    expect(calicoProgramsFor('v3.29.7')).toBe('v3.29.7');
    expect(calicoProgramsFor('v3.28.4')).toBe('v3.28.1');
    expect(calicoProgramsFor('v3.28.5')).toBe('v3.28.5');
    expect(calicoProgramsFor('v3.27.5')).toBe('v3.27.5');
    expect(calicoProgramsFor('v3.27.4')).toBe('v3.27.4');
    expect(calicoProgramsFor('v3.27.0')).toBe('v3.27.4');
    expect(calicoProgramsFor('v3.31.7')).toBe('v3.31.7');
    expect(calicoProgramsFor('v3.32.0')).toBe('v3.32.1');
  });
  it('names no tree for a minor it has none for, or no tag', () => {
    expect(calicoProgramsFor('v3.33.0')).toBeUndefined();
    expect(calicoProgramsFor('latest')).toBeUndefined();
    expect(calicoProgramsFor(undefined)).toBeUndefined();
  });
});

describe('cluster up options', () => {
  it('parses --calico and --install; waits unless --no-wait, 30 minutes unless --timeout', () => {
    expect(parseUpArgs([])).toEqual({ calico: undefined, install: 'operator', helmMajor: 4, datastore: 'kubernetes', wait: true, timeoutS: 1800 });
    expect(parseUpArgs(['--calico', '3.28.1', '--install', 'helm'])).toMatchObject({ install: 'helm', helmMajor: 4 });
    expect(parseUpArgs(['--calico', '3.28.1', '--install', 'helm3'])).toMatchObject({ install: 'helm', helmMajor: 3 });
    expect(parseUpArgs(['--calico', '3.27.4', '--install', 'manifest'])).toMatchObject({ calico: '3.27.4', install: 'manifest', wait: true });
    expect(parseUpArgs(['--calico=3.28.1'])).toMatchObject({ calico: '3.28.1', install: 'operator' });
    expect(parseUpArgs(['--calico=3.28.1', '--no-wait'])).toMatchObject({ wait: false });
    expect(parseUpArgs(['--timeout', '90'])).toMatchObject({ wait: true, timeoutS: 90 });
  });
  it('rejects bad input with one line', () => {
    expect(() => parseUpArgs(['--install', 'kubectl', '--calico', '3.28.1'])).toThrow('--install takes operator, manifest, helm or helm3, not "kubectl"');
    expect(() => parseUpArgs(['--install', 'operator'])).toThrow('--install needs --calico VERSION');
    expect(() => parseUpArgs(['--calico'])).toThrow('--calico needs a value');
    expect(() => parseUpArgs(['--bogus'])).toThrow('unknown option --bogus');
    expect(() => parseUpArgs(['--timeout', '5m'])).toThrow('--timeout takes whole seconds, not "5m"');
  });
});
