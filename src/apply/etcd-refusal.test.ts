import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { applyPlan } from './apply.js';
import { backup, type BackupOptions } from '../backup/backup.js';
import { exportBundle } from '../export/export.js';
import { isErrorKind } from '../core/errors.js';
import { RecordingIoHost, Reporter } from '../io/host.js';
import type { KubeClient } from '../kube/client.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import type { Plan } from '../plan/types.js';

/*
 * The engine entries that write refuse an etcd-datastore Calico first. The ConfigMap is the one Calico v3.28.1's
 * manifests/calico-etcd.yaml makes (kube-system/calico-config, etcd_endpoints). The fake API server answers the
 * datastore check's reads (and backup's v3-CRD check's list of CRD names) and fails any other request, so a refusal
 * that came late would show as that failure.
 */
const calicoConfig: KubeObject = {
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: 'calico-config', namespace: 'kube-system' },
  data: { etcd_endpoints: 'https://10.0.0.10:2379' },
};
function fakeClient(): { client: KubeClient; calls: string[] } {
  const calls: string[] = [];
  const client = {
    connection: { clusterName: 'etcd-cluster', server: 'https://127.0.0.1:1' },
    async getOrUndefined(r: ResourceType, ns: string | undefined, name: string) {
      calls.push(`GET ${r.kind} ${ns}/${name}`);
      return r.kind === 'ConfigMap' && ns === 'kube-system' && name === 'calico-config' ? structuredClone(calicoConfig) : undefined;
    },
    // backup looks for Calico 3.32's v3-CRD mode first (v3-crds.ts): a read, and no v3 CRDs here.
    async listMetadata(r: ResourceType) {
      calls.push(`LIST ${r.kind} metadata`);
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

describe('the etcd datastore is refused before anything is written', () => {
  it('export writes no bundle', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cnr-etcd-export-'));
    const err = await refusal(exportBundle(fakeClient().client, { out: path.join(dir, 'b') }, reporter()));
    expect(err.message).toContain('Calico here keeps its data in etcd (calico-config etcd_endpoints)');
    expect(readdirSync(dir)).toEqual([]);
  });

  it('backup opens no provider and writes no bundle', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cnr-etcd-backup-'));
    const opts = { out: path.join(dir, 'b'), concurrency: 1, snapshotTimeoutMs: 1000 } as BackupOptions;
    await refusal(backup(fakeClient().client, opts, reporter()));
    expect(readdirSync(dir)).toEqual([]);
  });

  it('apply opens no journal for a plan made elsewhere', async () => {
    const { client, calls } = fakeClient();
    await refusal(applyPlan(client, {} as Plan, {}, reporter()));
    expect(calls.every((c) => c.startsWith('GET '))).toBe(true);
  });
});
