import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { applyPlan } from './apply.js';
import { backup, type BackupOptions } from '../backup/backup.js';
import { exportBundle } from '../export/export.js';
import { restoreResources, type RestoreSource } from '../restore/restore.js';
import { isErrorKind } from '../core/errors.js';
import { RecordingIoHost, Reporter } from '../io/host.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import type { Plan } from '../plan/types.js';

/*
 * The engine entries that write refuse an etcd-datastore Calico first. The ConfigMap is the one Calico v3.28.1's
 * manifests/calico-etcd.yaml makes (kube-system/calico-config, etcd_endpoints). The fake API server answers the
 * reads of detectCalico and of the datastore check (objects it does not have are not found) and fails any other request,
 * so a refusal that came late (after a write, a provider or a journal) would show as that failure.
 */
const calicoConfig: KubeObject = {
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: 'calico-config', namespace: 'kube-system' },
  // Port 1 on loopback: nothing listens there, so the etcd this names cannot be reached (and no traffic leaves the machine).
  data: { etcd_endpoints: 'https://127.0.0.1:1' },
};
function fakeClient(config: KubeObject | null = calicoConfig): { client: KubeClient; calls: string[] } {
  const calls: string[] = [];
  const client = {
    connection: { clusterName: 'etcd-cluster', server: 'https://127.0.0.1:1' },
    async getOrUndefined(r: ResourceType, ns: string | undefined, name: string) {
      calls.push(`GET ${r.kind} ${ns}/${name}`);
      return r.kind === 'ConfigMap' && ns === 'kube-system' && name === 'calico-config' && config ? structuredClone(config) : undefined;
    },
    // The refusal judges what detectCalico (export, backup) or readCalicoObjects (apply) read: reads only, and
    // no v3 CRDs here (v3-crds.ts).
    async listMetadata(r: ResourceType) {
      calls.push(`LIST ${r.kind} metadata`);
      return [];
    },
    async serverVersion() {
      calls.push('GET version');
      return { gitVersion: 'v1.32.0' };
    },
    async get(r: ResourceType, ns: string | undefined, name: string) {
      calls.push(`GET ${r.kind} ${ns}/${name}`);
      if (r.kind === 'Namespace' && name === 'kube-system') return { apiVersion: 'v1', kind: 'Namespace', metadata: { name, uid: 'uid-1' } };
      throw new KubeApiError(404, 'NotFound', `${r.kind} ${name} not found`, 'GET', `/${r.plural}/${name}`);
    },
    async listAll(r: ResourceType) {
      calls.push(`LIST ${r.kind}`);
      return [];
    },
  };
  return {
    client: new Proxy(client, {
      get: (t, p) => (p in t ? t[p as keyof typeof t] : () => Promise.reject(new Error(`unexpected ${String(p)}`))),
    }) as unknown as KubeClient,
    calls,
  };
}
const reporter = () => new Reporter(new RecordingIoHost());

async function refusal(p: Promise<unknown>): Promise<Error> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isErrorKind(err, 'refused'), String(err)).toBe(true);
  return err as Error;
}

async function failure(p: Promise<unknown>, kind: 'environment' | 'refused' | 'bad-input'): Promise<Error> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isErrorKind(err, kind), String(err)).toBe(true);
  return err as Error;
}

describe('on the etcd datastore, export, backup and restore read etcd; an etcd they cannot reach stops them before anything is written', () => {
  it('export writes no bundle', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cnr-etcd-export-'));
    const err = await failure(exportBundle(fakeClient().client, { out: path.join(dir, 'b') }, reporter()), 'environment');
    expect(err.message).toContain("cannot reach Calico's etcd");
    expect(readdirSync(dir)).toEqual([]);
  });

  it('backup opens no provider and writes no bundle', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cnr-etcd-backup-'));
    const opts = { out: path.join(dir, 'b'), concurrency: 1, snapshotTimeoutMs: 1000 } as BackupOptions;
    const { client, calls } = fakeClient();
    const err = await failure(backup(client, opts, reporter()), 'environment');
    expect(err.message).toContain("cannot reach Calico's etcd");
    expect(calls.every((c) => c.startsWith('GET ') || c.startsWith('LIST '))).toBe(true);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('restore refuses a bundle of the Kubernetes datastore by name, before reaching etcd', async () => {
    const { client, calls } = fakeClient();
    const bundle = { manifest: { cluster: { uid: 'u' }, calico: {} }, v3Objects: async function* () {}, etcdIpamRecords: async function* () {} };
    const err = await refusal(restoreResources(client, bundle as unknown as RestoreSource, {}, reporter()));
    expect(err.message).toContain('this bundle was exported from the Kubernetes datastore, and Calico here keeps its data in etcd');
    expect(calls.every((c) => c.startsWith('GET ') || c.startsWith('LIST '))).toBe(true);
  });

  it('restore --prune is bad input on etcd (it never deletes there), said before reaching etcd', async () => {
    const { client } = fakeClient();
    const bundle = {
      manifest: { datastore: { type: 'etcd', revision: '9' }, cluster: { uid: 'u' }, calico: {} },
      v3Objects: async function* () {},
      etcdIpamRecords: async function* () {},
    };
    const err = await failure(restoreResources(client, bundle as unknown as RestoreSource, { prune: true }, reporter()), 'bad-input');
    expect(err.message).toContain('--prune is not offered on the etcd datastore');
  });
});

describe('plan and apply refuse the etcd datastore before anything is written', () => {
  it('apply opens no journal for a plan made elsewhere', async () => {
    const { client, calls } = fakeClient();
    await refusal(applyPlan(client, {} as Plan, {}, reporter()));
    expect(calls.every((c) => c.startsWith('GET ') || c.startsWith('LIST '))).toBe(true);
  });

  it('apply refuses a plan made for an etcd install once Calico here keeps its data in the Kubernetes datastore', async () => {
    // No calico-config: the Kubernetes datastore.
    const { client, calls } = fakeClient(null);
    const err = await refusal(applyPlan(client, { datastore: 'etcd', strategy: 'in-place' } as Plan, {}, reporter()));
    expect(err.message).toContain('the plan is for a Calico on the etcd datastore, and Calico here keeps its data in the Kubernetes datastore');
    expect(calls.every((c) => c.startsWith('GET ') || c.startsWith('LIST '))).toBe(true);
  });
});
