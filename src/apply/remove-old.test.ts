import { describe, expect, it, vi } from 'vitest';
import { RecordingIoHost, Reporter } from '../io/host.js';
import type { KubeClient } from '../kube/client.js';
import type { KubeObject, ResourceType } from '../kube/types.js';

// The bundle checks are judged elsewhere (verify.test.ts, compare.test.ts); here only what happens around them.
const checks = vi.hoisted(() => ({ extra: [] as { object: string; problem: string }[] }));
vi.mock('../bundle/verify.js', () => ({ verifyBundle: async () => ({ ok: true, problems: [] }) }));
vi.mock('../plan/compare.js', () => ({ liveDataNotInBundle: async () => checks.extra }));
const { removeOld } = await import('./remove-old.js');

const crd = (name: string, group: string): KubeObject => ({
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name },
  spec: { group, names: { plural: name.split('.')[0], kind: 'X' }, scope: 'Cluster', versions: [{ name: 'v1', storage: true }] },
});

/** A cluster of two Calico CRDs and ClusterInformation default, recording every write in order. */
function recordingCluster() {
  const writes: string[] = [];
  let crds = [crd('ippools.crd.projectcalico.org', 'crd.projectcalico.org'), crd('clusterinformations.crd.projectcalico.org', 'crd.projectcalico.org')];
  const ci: KubeObject = { apiVersion: 'crd.projectcalico.org/v1', kind: 'ClusterInformation', metadata: { name: 'default' }, spec: { datastoreReady: true } };
  const client = {
    getOrUndefined: async (t: ResourceType) => (t.plural === 'clusterinformations' ? ci : undefined),
    mergePatch: async (t: ResourceType, _ns: string | undefined, name: string, patch: any) => {
      writes.push(`patch ${t.plural}/${name} datastoreReady=${patch.spec?.datastoreReady}`);
    },
    listAll: async (t: ResourceType) => (t.plural === 'customresourcedefinitions' ? crds : []),
    delete: async (t: ResourceType, _ns: string | undefined, name: string) => {
      writes.push(`delete ${t.plural}/${name}`);
      if (t.plural === 'customresourcedefinitions') crds = crds.filter((c) => c.metadata.name !== name);
      return true;
    },
    waitFor: async (_what: string, probe: () => Promise<unknown>) => {
      for (;;) if ((await probe()) !== undefined) return;
    },
  } as unknown as KubeClient;
  return { client, writes };
}

const target = { operatorObjects: [] } as any;
const bundle = {} as any;

describe('remove-old (the reinstall delete step) under the datastore lock (issue 29)', () => {
  it('locks ClusterInformation before deleting any CRD and leaves the lock to go with it', async () => {
    const { client, writes } = recordingCluster();
    await removeOld(client, bundle, target, new Reporter(new RecordingIoHost()));
    expect(writes[0]).toBe('patch clusterinformations/default datastoreReady=false');
    expect(writes.filter((w) => w.startsWith('delete customresourcedefinitions/'))).toHaveLength(2);
    // No release after the deletes: ClusterInformation went with its CRD; the target's restore unlocks.
    expect(writes.filter((w) => w.includes('datastoreReady=true'))).toEqual([]);
  });

  it('releases the lock when it refuses to delete (live data the bundle lacks), deleting nothing', async () => {
    const { client, writes } = recordingCluster();
    checks.extra = [{ object: 'IPAMHandle h', problem: 'not in the bundle' }];
    const err = await removeOld(client, bundle, target, new Reporter(new RecordingIoHost())).catch((e) => e);
    checks.extra = [];
    expect(err.message).toMatch(/would not bring back/);
    expect(writes).toEqual(['patch clusterinformations/default datastoreReady=false', 'patch clusterinformations/default datastoreReady=true']);
  });
});
