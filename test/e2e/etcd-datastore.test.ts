/**
 * A Calico that keeps its data in etcd (issue 31): status names the datastore, export/backup/plan refuse it by name
 * (exit 5) and write nothing, doctor reports `etcd-datastore` instead of `calico-crds-missing`. The objects are the
 * ones Calico v3.28.1's manifests/calico-etcd.yaml makes (kube-system/calico-config with etcd_endpoints, the calico-node
 * DaemonSet reading ETCD_* from it); kwok's nodes do not run calico-node, which is not needed: detection reads objects.
 */
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { K } from '../../src/kube/builtin.js';
import { resetCalico, runCli, testClient } from './helpers.js';

const fromConfig = (name: string, key: string) => ({ name, valueFrom: { configMapKeyRef: { name: 'calico-config', key } } });

const calicoConfig = {
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: 'calico-config', namespace: 'kube-system' },
  data: {
    etcd_endpoints: 'https://127.0.0.1:2379',
    etcd_ca: '',
    etcd_cert: '',
    etcd_key: '',
    typha_service_name: 'none',
    calico_backend: 'bird',
    veth_mtu: '0',
  },
};

const calicoNode = {
  apiVersion: 'apps/v1',
  kind: 'DaemonSet',
  metadata: { name: 'calico-node', namespace: 'kube-system', labels: { 'k8s-app': 'calico-node' } },
  spec: {
    selector: { matchLabels: { 'k8s-app': 'calico-node' } },
    template: {
      metadata: { labels: { 'k8s-app': 'calico-node' } },
      spec: {
        // Nowhere to run: the test reads the object, and kwok would fake its pods on its nodes otherwise.
        nodeSelector: { 'cni-rewind.test/no-such-node': 'true' },
        hostNetwork: true,
        serviceAccountName: 'calico-node',
        containers: [
          {
            name: 'calico-node',
            image: 'docker.io/calico/node:v3.28.1',
            env: [
              fromConfig('ETCD_ENDPOINTS', 'etcd_endpoints'),
              fromConfig('ETCD_CA_CERT_FILE', 'etcd_ca'),
              fromConfig('ETCD_KEY_FILE', 'etcd_key'),
              fromConfig('ETCD_CERT_FILE', 'etcd_cert'),
              { name: 'CALICO_K8S_NODE_REF', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
              fromConfig('CALICO_NETWORKING_BACKEND', 'calico_backend'),
              { name: 'CLUSTER_TYPE', value: 'k8s,bgp' },
            ],
          },
        ],
      },
    },
  },
};

const REFUSAL = 'Calico here keeps its data in etcd (calico-config etcd_endpoints): cni-rewind supports the Kubernetes datastore only';

describe('a Calico on the etcd datastore (calico-etcd.yaml)', () => {
  let client: KubeClient;
  let work: string;

  beforeAll(async () => {
    client = await testClient();
    await resetCalico(client);
    await client.apply(K.configMap, calicoConfig);
    await client.apply(K.daemonSet, calicoNode);
    work = mkdtempSync(path.join(tmpdir(), 'cnr-etcd-'));
  });

  afterAll(async () => {
    await client.delete(K.daemonSet, 'kube-system', 'calico-node');
    await client.delete(K.configMap, 'kube-system', 'calico-config');
  });

  it('status shows the etcd datastore and the manifest install, in text and in -o json', async () => {
    const text = await runCli(['status']);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain('Datastore   etcd (calico-config etcd_endpoints): not supported by cni-rewind');
    expect(text.stdout).toContain('Installed   manifest (calico.yaml)');
    expect(text.stdout).toContain('Image       calico-node: registry docker.io, by tag, version v3.28.1');
    const json = await runCli(['status', '-o', 'json']);
    expect(json.code, json.stderr).toBe(0);
    const method = JSON.parse(json.stdout).calico.method;
    expect(method.datastore).toEqual({ type: 'etcd', evidence: 'calico-config etcd_endpoints' });
    expect(method.method).toBe('manifest');
  });

  it('export, backup and plan refuse it by name with exit 5 and write nothing', async () => {
    for (const args of [
      ['export', '--out', path.join(work, 'export-bundle')],
      ['backup', '--out', path.join(work, 'backup-bundle'), '--allow-unprotected-nodes'],
      ['plan', '--to', '3.29.7', '--out', path.join(work, 'plan.json')],
    ]) {
      const r = await runCli(args, { cwd: work });
      expect(r.code, `${args[0]}: ${r.stderr}`).toBe(5);
      expect(r.stderr.split('\n')[0]).toContain(REFUSAL);
      expect(r.stderr).toContain('etcdctl snapshot save');
      expect(r.stderr).not.toMatch(/\n\s+at /);
      expect(readdirSync(work), args[0]).toEqual([]);
    }
  });

  it('doctor reports etcd-datastore, not calico-crds-missing and its manifest re-apply', async () => {
    const r = await runCli(['doctor', '-o', 'json']);
    const ids = (JSON.parse(r.stdout).findings as { id: string }[]).map((f) => f.id);
    expect(ids).toContain('etcd-datastore');
    expect(ids).not.toContain('calico-crds-missing');
    expect(r.code).toBe(1); // warnings only
  });
});
