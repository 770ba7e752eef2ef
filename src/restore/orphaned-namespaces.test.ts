import { describe, expect, it } from 'vitest';
import { RecordingIoHost, Reporter } from '../io/host.js';
import type { KubeClient } from '../kube/client.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import { OrphanedNamespaces } from './orphaned-namespaces.js';

/** Namespaces and an Installation being deleted; records every delete and patch. */
function cluster(namespaces: string[]) {
  const live = new Set(namespaces);
  const calls: string[] = [];
  const installation: KubeObject = { apiVersion: 'operator.tigera.io/v1', kind: 'Installation', metadata: { name: 'default', deletionTimestamp: 't' } };
  const client = {
    getOrUndefined: async (t: ResourceType, _ns: string | undefined, name: string) =>
      t.plural === 'namespaces' ? (live.has(name) ? { metadata: { name } } : undefined) : installation,
    delete: async (t: ResourceType, _ns: string | undefined, name: string) => {
      calls.push(`delete ${t.plural}/${name}`);
      live.delete(name);
    },
    mergePatch: async (t: ResourceType, _ns: string | undefined, name: string, patch: any) => {
      calls.push(`patch ${t.plural}/${name} ${Object.keys(patch.metadata.annotations).join()}`);
    },
  } as unknown as KubeClient;
  return { client, calls };
}

describe('OrphanedNamespaces', () => {
  it('deletes a namespace that outlived its owner past the grace, once, then nudges the Installation being deleted', async () => {
    const { client, calls } = cluster(['calico-apiserver']);
    const host = new RecordingIoHost();
    const orphans = new OrphanedNamespaces(client, new Reporter(host), 60_000);
    await orphans.tick(['calico-apiserver'], 0);
    await orphans.tick(['calico-apiserver'], 59_000);
    expect(calls).toEqual([]);
    await orphans.tick(['calico-apiserver'], 61_000);
    expect(calls).toEqual(['delete namespaces/calico-apiserver', 'patch installations/default cni-rewind.io/nudge']);
    expect(host.messages.map((m) => m.code)).toEqual(['CNR_RESTORE_COLLECT_NAMESPACE']);
    expect(host.messages[0]!.message).toMatch(/namespace calico-apiserver outlived its owner for 61 s.*namespace-owner-gone.*Restart kube-controller-manager/);
    await orphans.tick([], 70_000);
    expect(calls).toHaveLength(2);
  });

  it('leaves a namespace the collector takes within the grace alone', async () => {
    const { client, calls } = cluster(['calico-system']);
    const orphans = new OrphanedNamespaces(client, new Reporter(new RecordingIoHost()), 60_000);
    await orphans.tick(['calico-system'], 0);
    await orphans.tick([], 30_000);
    await orphans.tick([], 90_000);
    expect(calls).toEqual([]);
  });
});
