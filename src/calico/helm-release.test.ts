import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { decodeHelmReleaseData, HELM_RELEASE_MAX_BYTES, helmRecordMarks, helmRecordName, readHelmRelease, summarizeHelmRelease } from './helm-release.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import type { KubeObject } from '../kube/types.js';

/*
 * Records encoded the way Helm's storage driver writes them (helm.sh/helm/v4 pkg/storage/driver/util.go
 * encodeRelease: JSON, gzip, base64; the Secret's data adds the API's own base64), with the release fields Helm's
 * pkg/release/v1 Release and chart Metadata marshal (name, info.status, chart.metadata, config, version,
 * namespace). test/e2e/helm-install.test.ts reads records the real helm program wrote.
 */
function helmEncode(json: string, gzip = true): string {
  const helmText = Buffer.from(gzip ? gzipSync(json) : Buffer.from(json)).toString('base64');
  return Buffer.from(helmText).toString('base64');
}

const releaseJson = (over: Record<string, unknown> = {}) =>
  JSON.stringify({
    name: 'calico',
    namespace: 'tigera-operator',
    version: 2,
    info: { status: 'deployed', description: 'Upgrade complete' },
    chart: { metadata: { name: 'tigera-operator', version: 'v3.28.1', appVersion: 'v3.28.1', apiVersion: 'v2' } },
    config: { installation: { enabled: false }, imagePullSecrets: { 'my-registry': 'c2VjcmV0LXRva2Vu' } },
    manifest: '---\n# Source: tigera-operator/templates/tigera-operator/02-tigera-operator.yaml\n',
    ...over,
  });

function record(name: string, labels: Record<string, string>, data?: string): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace: 'tigera-operator', labels: { owner: 'helm', name: 'calico', ...labels } },
    type: 'helm.sh/release.v1',
    ...(data !== undefined ? { data: { release: data } } : {}),
  } as KubeObject;
}

/** A client answering Secret and ConfigMap lists by label selector from `objects`, or failing every call with `fail`. */
function secretsClient(objects: KubeObject[], fail?: Error) {
  const selectors: string[] = [];
  const client = {
    async listAll(r: { kind: string }, opts: { namespace?: string; labelSelector?: string }) {
      selectors.push(`${r.kind} ${opts.namespace} ${opts.labelSelector}`);
      if (fail) throw fail;
      const want = Object.fromEntries((opts.labelSelector ?? '').split(',').map((kv) => kv.split('=') as [string, string]));
      return objects.filter((s) => s.kind === r.kind && Object.entries(want).every(([k, v]) => s.metadata.labels?.[k] === v));
    },
  };
  return { client: client as unknown as KubeClient, selectors };
}

describe('Helm release records', () => {
  it('decodes a gzipped record and reports chart, revision, status and value keys, never a value', () => {
    const summary = summarizeHelmRelease(decodeHelmReleaseData(helmEncode(releaseJson())));
    expect(summary).toEqual({
      chart: { name: 'tigera-operator', version: 'v3.28.1', appVersion: 'v3.28.1' },
      revision: 2,
      status: 'deployed',
      valueKeys: ['installation', 'imagePullSecrets'],
    });
    expect(JSON.stringify(summary)).not.toContain('c2VjcmV0LXRva2Vu');
    expect(JSON.stringify(summary)).not.toContain('my-registry');
  });

  it('decodes a record stored before Helm compressed them (base64 JSON)', () => {
    expect(summarizeHelmRelease(decodeHelmReleaseData(helmEncode(releaseJson({ version: 1 }), false)))).toMatchObject({ revision: 1, status: 'deployed' });
  });

  it('refuses a record that decompresses beyond the limit (a gzip bomb) without inflating it whole', () => {
    const bomb = gzipSync(Buffer.alloc(HELM_RELEASE_MAX_BYTES + 1024, 0x20));
    expect(bomb.length).toBeLessThan(100 * 1024);
    const data = Buffer.from(bomb.toString('base64')).toString('base64');
    expect(() => decodeHelmReleaseData(data)).toThrow(`the record decompresses to more than ${HELM_RELEASE_MAX_BYTES} bytes`);
  });

  it('says what is wrong with data that is not Helm encoding', () => {
    expect(() => decodeHelmReleaseData(Buffer.from(Buffer.from('not json').toString('base64')).toString('base64'))).toThrow(
      'the record is not Helm release JSON',
    );
    const brokenGzip = Buffer.concat([gzipSync(releaseJson()).subarray(0, 30)]);
    expect(() => decodeHelmReleaseData(Buffer.from(brokenGzip.toString('base64')).toString('base64'))).toThrow(/^the record is not valid gzip/);
    expect(() => summarizeHelmRelease(['a list'])).toThrow('the record is not Helm release JSON');
  });

  it('reports only fields of the type Helm writes, printable and short, and names at most 50 plain value keys', () => {
    const config: Record<string, number> = { 'bad key\u001b[31m': 1 };
    for (let i = 0; i < 60; i++) config[`key${i}`] = i;
    const summary = summarizeHelmRelease({
      version: '7',
      info: { status: 'deployed\u001b]0;owned\u0007' },
      chart: { metadata: { name: 'x'.repeat(300), version: 3, appVersion: 'v1' } },
      config,
    });
    expect(summary.revision).toBeUndefined();
    expect(summary.status).toBe('deployed?]0;owned?');
    expect(summary.chart).toEqual({ name: `${'x'.repeat(100)}...`, appVersion: 'v1' });
    expect(summary.valueKeys).toHaveLength(50);
    expect(summary.otherValueKeys).toBe(11);
    expect(summary.valueKeys!.join()).not.toContain('bad key');
  });
});

describe('readHelmRelease', () => {
  it('reads the deployed revision, the newest one if several say deployed', async () => {
    const { client, selectors } = secretsClient([
      record('sh.helm.release.v1.calico.v1', { status: 'superseded', version: '1' }, helmEncode(releaseJson({ version: 1, info: { status: 'superseded' } }))),
      record('sh.helm.release.v1.calico.v10', { status: 'deployed', version: '10' }, helmEncode(releaseJson({ version: 10 }))),
      record('sh.helm.release.v1.calico.v9', { status: 'deployed', version: '9' }, helmEncode(releaseJson({ version: 9 }))),
    ]);
    const rel = await readHelmRelease(client, 'calico', 'tigera-operator');
    expect(rel).toMatchObject({ release: 'calico', namespace: 'tigera-operator', record: 'sh.helm.release.v1.calico.v10', revision: 10, status: 'deployed' });
    expect(selectors).toEqual(['Secret tigera-operator owner=helm,name=calico,status=deployed']);
  });

  it('reads the newest revision when none is deployed (an upgrade under way or failed)', async () => {
    const { client, selectors } = secretsClient([
      record('sh.helm.release.v1.calico.v1', { status: 'superseded', version: '1' }, helmEncode(releaseJson({ version: 1 }))),
      record(
        'sh.helm.release.v1.calico.v2',
        { status: 'pending-upgrade', version: '2' },
        helmEncode(releaseJson({ version: 2, info: { status: 'pending-upgrade' } })),
      ),
    ]);
    expect(await readHelmRelease(client, 'calico', 'tigera-operator')).toMatchObject({ revision: 2, status: 'pending-upgrade' });
    expect(selectors[1]).toBe('Secret tigera-operator owner=helm,name=calico');
  });

  it('says in one line when the records are forbidden, missing or undecodable, and goes on', async () => {
    const forbidden = new KubeApiError(
      403,
      'Forbidden',
      'secrets is forbidden',
      'GET',
      '/api/v1/namespaces/tigera-operator/secrets',
      undefined,
      'system:serviceaccount:cni-rewind:cni-rewind',
    );
    expect(await readHelmRelease(secretsClient([], forbidden).client, 'calico', 'tigera-operator')).toEqual({
      release: 'calico',
      namespace: 'tigera-operator',
      unreadable: "listing Secrets in tigera-operator (Helm's release records) is forbidden for system:serviceaccount:cni-rewind:cni-rewind",
    });
    expect((await readHelmRelease(secretsClient([]).client, 'calico', 'tigera-operator')).unreadable).toBe(
      'no Helm release record (Secret or ConfigMap labelled owner=helm,name=calico) in tigera-operator',
    );
    const bad = secretsClient([record('sh.helm.release.v1.calico.v1', { status: 'deployed', version: '1' }, 'bm90IGJhc2U2NA==')]);
    expect((await readHelmRelease(bad.client, 'calico', 'tigera-operator')).unreadable).toBe(
      'Secret tigera-operator/sh.helm.release.v1.calico.v1: the record is not Helm release JSON',
    );
    await expect(readHelmRelease(secretsClient([], new KubeApiError(500, 'InternalError', 'boom', 'GET', '/')).client, 'calico', 'x')).rejects.toThrow('boom');
  });

  it("reads Helm's ConfigMap storage (HELM_DRIVER=configmap) when there is no Secret record", async () => {
    const helmText = gzipSync(releaseJson({ version: 3 })).toString('base64');
    const cm = {
      ...record('sh.helm.release.v1.calico.v3', { status: 'deployed', version: '3' }),
      kind: 'ConfigMap',
      data: { release: helmText },
    } as KubeObject;
    const { client, selectors } = secretsClient([cm]);
    expect(await readHelmRelease(client, 'calico', 'tigera-operator')).toMatchObject({
      record: 'ConfigMap/sh.helm.release.v1.calico.v3',
      revision: 3,
      status: 'deployed',
    });
    expect(selectors).toEqual([
      'Secret tigera-operator owner=helm,name=calico,status=deployed',
      'Secret tigera-operator owner=helm,name=calico',
      'ConfigMap tigera-operator owner=helm,name=calico,status=deployed',
    ]);
  });

  it('never puts an annotation that is not a release name into a label selector, nor one that is not a namespace into a path', async () => {
    const { client, selectors } = secretsClient([]);
    expect((await readHelmRelease(client, 'calico,owner!=helm', 'tigera-operator')).unreadable).toBe("'calico,owner!=helm' is not a Helm release name");
    expect((await readHelmRelease(client, 'calico', '../../../apis')).unreadable).toBe("'../../../apis' is not a namespace name");
    expect(selectors).toEqual([]);
  });
});

describe('which objects are Helm release records', () => {
  const cm = (name: string, labels?: Record<string, string>): KubeObject => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, namespace: 'x', ...(labels ? { labels } : {}) },
  });
  const secret = (name: string, type?: string, labels?: Record<string, string>): KubeObject =>
    ({ apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace: 'x', ...(labels ? { labels } : {}) }, ...(type ? { type } : {}) }) as KubeObject;

  it('a record is Helm’s name with Helm’s type or owner label, as helm writes it with either driver', () => {
    expect(helmRecordMarks(record('sh.helm.release.v1.calico.v2', {}))).toBe('record');
    expect(helmRecordMarks(secret('sh.helm.release.v1.calico.v2', 'helm.sh/release.v1'))).toBe('record');
    expect(helmRecordMarks(secret('sh.helm.release.v1.calico.v2', 'Opaque', { owner: 'helm' }))).toBe('record');
    expect(helmRecordMarks(cm('sh.helm.release.v1.calico.v1', { owner: 'helm', name: 'calico', status: 'deployed' }))).toBe('record');
  });

  it('a label or a type alone never makes another object Helm’s; with the name, or the name alone, it is partial', () => {
    // Calico's own Secret labelled owner=helm, or given Helm's type: not a record (restore refuses it, never skips it quietly).
    expect(helmRecordMarks(secret('tigera-ca-private', 'kubernetes.io/tls', { owner: 'helm' }))).toBe('partial');
    expect(helmRecordMarks(secret('tigera-ca-private', 'helm.sh/release.v1'))).toBe('partial');
    expect(helmRecordMarks(cm('calico-config', { owner: 'helm' }))).toBe('partial');
    // Helm's name without its other marks: `helm get --revision` would still read it by name.
    expect(helmRecordMarks(secret('sh.helm.release.v1.calico.v9', 'Opaque'))).toBe('partial');
    expect(helmRecordMarks(cm('sh.helm.release.v1.calico.v9', { owner: 'someone-else' }))).toBe('partial');
    expect(helmRecordMarks(secret('tigera-ca-private', 'kubernetes.io/tls', { owner: 'tigera' }))).toBeUndefined();
    expect(helmRecordMarks(cm('calico-config'))).toBeUndefined();
    // Other kinds are never records, whatever they carry.
    expect(
      helmRecordMarks({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'sh.helm.release.v1.calico.v1', labels: { owner: 'helm' } } }),
    ).toBeUndefined();
  });

  it('reads release and revision from a record name only when Helm could have written it', () => {
    expect(helmRecordName('sh.helm.release.v1.calico.v2')).toEqual({ release: 'calico', revision: 2 });
    expect(helmRecordName('sh.helm.release.v1.my.release-1.v12')).toEqual({ release: 'my.release-1', revision: 12 });
    expect(helmRecordName('sh.helm.release.v1.foo.v1.v3')).toEqual({ release: 'foo.v1', revision: 3 });
    for (const bad of [
      'sh.helm.release.v1.calico',
      'sh.helm.release.v1.calico.v0',
      'sh.helm.release.v1.Calico.v1',
      'sh.helm.release.v1.cal\u001b[2Jico.v1',
      'sh.helm.release.v1..v1',
      `sh.helm.release.v1.${'a'.repeat(54)}.v1`,
      `sh.helm.release.v1.${'a-'.repeat(5000)}!.v1`,
    ])
      expect(helmRecordName(bad), bad).toBeUndefined();
  });
});
