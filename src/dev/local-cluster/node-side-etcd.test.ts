import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadRelease } from '../../calico/release.js';
import type { KubeClient } from '../../kube/client.js';
import type { KubeObject } from '../../kube/types.js';
import { etcdInstallObjects } from './calico-etcd-install.js';
import { parseUpArgs } from './cli.js';
import { kubeControllersEtcdEnv } from './kube-controllers-etcd.js';
import { cniPluginConfig, localSecretPath, nodeSideEnv, wantedNodeSides } from './node-side-desired.js';
import { loopbackEtcdPort, writeSecretVolumes } from './node-side-etcd.js';

// The real calico-etcd.yaml of 3.28.1 as `up --datastore etcd` fills it in (placeholder PEM text: nothing is dialled).
const release = await loadRelease('3.28.1', { offline: true, need: 'etcd' });
const objs = etcdInstallObjects(release.calicoEtcdManifest!, { endpoint: 'https://127.0.0.1:31453', ca: 'CA PEM', cert: 'CERT PEM', key: 'KEY PEM' });
const find = (kind: string, name: string) => objs.find((o) => o.kind === kind && o.metadata.name === name)!;
const config = find('ConfigMap', 'calico-config');
const secret = find('Secret', 'calico-etcd-secrets');
const lookup = (ns: string, name: string, key: string) => (ns === 'kube-system' && name === 'calico-config' ? config.data?.[key] : undefined);
/** The pod the DaemonSet makes on a node (its template, bound). */
const ds = find('DaemonSet', 'calico-node');
const pod: KubeObject = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'calico-node-x', namespace: 'kube-system', uid: 'u1' },
  spec: { ...ds.spec.template.spec, nodeName: 'n1' },
};
const fakeClient = {
  getOrUndefined: async (_t: unknown, ns: string, name: string) => objs.find((o) => o.metadata.namespace === ns && o.metadata.name === name),
} as unknown as KubeClient;
const tmp = mkdtempSync(path.join(os.tmpdir(), 'cnirw-etcd-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('calico-etcd.yaml filled in for the Calico etcd', () => {
  it('points calico-config at the etcd and its /calico-secrets files, the Secret holding them', () => {
    expect(config.data).toMatchObject({
      etcd_endpoints: 'https://127.0.0.1:31453',
      etcd_ca: '/calico-secrets/etcd-ca',
      etcd_cert: '/calico-secrets/etcd-cert',
      etcd_key: '/calico-secrets/etcd-key',
    });
    expect(Object.fromEntries(Object.entries<string>(secret.data!).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]))).toEqual({
      'etcd-ca': 'CA PEM',
      'etcd-cert': 'CERT PEM',
      'etcd-key': 'KEY PEM',
    });
    expect(objs.length).toBe(release.calicoEtcdManifest!.length);
  });
});

describe('the node side on the etcd datastore', () => {
  const [w] = wantedNodeSides([pod], lookup);
  const secretsDir = path.join(tmp, 'secrets');

  it('writes the Secret volume into the work dir, keys 0600', async () => {
    expect(w!.etcd?.secretMounts).toEqual([{ mountPath: '/calico-secrets', namespace: 'kube-system', secret: 'calico-etcd-secrets' }]);
    expect(await writeSecretVolumes(fakeClient, w!.etcd!.secretMounts, secretsDir)).toBeUndefined();
    const key = path.join(secretsDir, 'kube-system', 'calico-etcd-secrets', 'etcd-key');
    expect(readFileSync(key, 'utf8')).toBe('KEY PEM');
    expect(statSync(key).mode & 0o777).toBe(0o600);
    expect(await writeSecretVolumes(fakeClient, [{ mountPath: '/x', namespace: 'kube-system', secret: 'absent' }], secretsDir)).toBe(
      'Secret kube-system/absent not found',
    );
  });

  it('runs calico-node in etcdv3 mode with this machine copies of the certificates', () => {
    const env = nodeSideEnv(w!, '/kc', '/nd', '127.0.1.1', secretsDir);
    const copy = (k: string) => path.join(secretsDir, 'kube-system', 'calico-etcd-secrets', k);
    expect(env).toMatchObject({
      DATASTORE_TYPE: 'etcdv3',
      ETCD_ENDPOINTS: 'https://127.0.0.1:31453',
      ETCD_CA_CERT_FILE: copy('etcd-ca'),
      ETCD_CERT_FILE: copy('etcd-cert'),
      ETCD_KEY_FILE: copy('etcd-key'),
      NODENAME: 'n1',
      IP: '127.0.1.1',
    });
  });

  it('fills the CNI config as install-cni would: endpoints, certificate copies, etcdv3', () => {
    const conf = cniPluginConfig(w!, '/kc', '/log', '/status', secretsDir);
    const copy = (k: string) => path.join(secretsDir, 'kube-system', 'calico-etcd-secrets', k);
    expect(conf).toMatchObject({
      type: 'calico',
      datastore_type: 'etcdv3',
      etcd_endpoints: 'https://127.0.0.1:31453',
      etcd_ca_cert_file: copy('etcd-ca'),
      etcd_cert_file: copy('etcd-cert'),
      etcd_key_file: copy('etcd-key'),
      nodename: 'n1',
      kubernetes: { kubeconfig: '/kc' },
    });
    // A key the Secret lacks is "" (install-cni writes no file for it).
    expect(cniPluginConfig(w!, '/kc', '/log', '/status', path.join(tmp, 'empty'))).toMatchObject({ etcd_key_file: '', etcd_ca_cert_file: '' });
  });

  it('runs kube-controllers from its Deployment env in etcd mode', async () => {
    const got = await kubeControllersEtcdEnv(fakeClient, find('Deployment', 'calico-kube-controllers'), secretsDir);
    expect(got).toEqual({
      env: {
        DATASTORE_TYPE: 'etcdv3',
        ETCD_ENDPOINTS: 'https://127.0.0.1:31453',
        ETCD_CA_CERT_FILE: path.join(secretsDir, 'kube-system', 'calico-etcd-secrets', 'etcd-ca'),
        ETCD_CERT_FILE: path.join(secretsDir, 'kube-system', 'calico-etcd-secrets', 'etcd-cert'),
        ETCD_KEY_FILE: path.join(secretsDir, 'kube-system', 'calico-etcd-secrets', 'etcd-key'),
        ENABLED_CONTROLLERS: 'policy,namespace,serviceaccount,workloadendpoint,node',
      },
    });
    // calico.yaml's Deployment (the Kubernetes datastore): not etcd mode.
    const k8s = (await loadRelease('3.28.1', { offline: true, need: 'manifest' })).calicoManifest!.find((o) => o.kind === 'Deployment')!;
    expect(await kubeControllersEtcdEnv(fakeClient, k8s, secretsDir)).toBeUndefined();
  });

  it('maps only paths under a Secret mount, and bridges only a 127.0.0.1 endpoint', () => {
    const m = [{ mountPath: '/calico-secrets/', namespace: 'ns', secret: 's' }];
    expect(localSecretPath('/calico-secrets/etcd-ca', m, '/d')).toBe('/d/ns/s/etcd-ca');
    expect(localSecretPath('/etc/other', m, '/d')).toBe('/etc/other');
    expect(loopbackEtcdPort('https://127.0.0.1:31453')).toBe(31453);
    expect(loopbackEtcdPort('https://10.0.0.5:2379')).toBeUndefined();
  });
});

describe('up --datastore', () => {
  it('takes etcd with the manifest install only', () => {
    expect(parseUpArgs(['--calico', '3.28.1', '--datastore', 'etcd'])).toMatchObject({ datastore: 'etcd', install: 'manifest' });
    expect(parseUpArgs(['--calico', '3.28.1', '--install', 'manifest', '--datastore=etcd'])).toMatchObject({ datastore: 'etcd' });
    expect(() => parseUpArgs(['--calico', '3.28.1', '--install', 'helm', '--datastore', 'etcd'])).toThrow(/--datastore etcd installs calico-etcd.yaml/);
    expect(() => parseUpArgs(['--calico', '3.28.1', '--install', 'operator', '--datastore', 'etcd'])).toThrow(/--datastore etcd/);
    expect(() => parseUpArgs(['--datastore', 'etcd'])).toThrow('--datastore needs --calico VERSION');
    expect(() => parseUpArgs(['--calico', '3.28.1', '--datastore', 'crd'])).toThrow('--datastore takes kubernetes or etcd, not "crd"');
  });
});
