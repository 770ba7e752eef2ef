import { describe, expect, it } from 'vitest';
import { RecordingIoHost, Reporter } from '../io/host.js';
import type { KubeClient } from '../kube/client.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import { lockDatastore, pauseOperator } from './guards.js';

/** The operator Deployment with `replicas`, no pod left; records the patches. */
function operatorCluster(replicas: number): { client: KubeClient; patches: unknown[] } {
  const patches: unknown[] = [];
  const dep: KubeObject = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'tigera-operator', namespace: 'tigera-operator' },
    spec: { replicas, selector: { matchLabels: { name: 'tigera-operator' } } },
  };
  const client = {
    getOrUndefined: async () => dep,
    mergePatch: async (_t: unknown, _ns: unknown, _n: unknown, body: unknown) => void patches.push(body),
    listAll: async () => [],
    waitFor: async (_what: string, check: () => Promise<unknown>) => check(),
  } as unknown as KubeClient;
  return { client, patches };
}

describe('pausing the tigera operator', () => {
  it('says whether the operator was running, so a restore inside apply (operator already at 0) does not wait for its reports', async () => {
    const running = await pauseOperator(operatorCluster(1).client, new Reporter(new RecordingIoHost()));
    expect(running?.wasRunning).toBe(true);
    const stopped = operatorCluster(0);
    const pause = await pauseOperator(stopped.client, new Reporter(new RecordingIoHost()));
    expect(pause?.wasRunning).toBe(false);
    await pause!.release();
    expect(stopped.patches.at(-1)).toMatchObject({ spec: { replicas: 0 } });
  });
});

describe('the datastore lock', () => {
  /** ClusterInformation default with `spec`; records the merge patches and applies them as the API server would. */
  function clusterInfo(spec: Record<string, unknown>): { client: KubeClient; patches: any[]; ci: KubeObject } {
    const patches: any[] = [];
    const ci: KubeObject = { apiVersion: 'crd.projectcalico.org/v1', kind: 'ClusterInformation', metadata: { name: 'default', annotations: {} }, spec };
    const client = {
      getOrUndefined: async () => ci,
      mergePatch: async (_t: unknown, _ns: unknown, _n: unknown, body: any) => {
        patches.push(body);
        Object.assign(ci.spec, body.spec);
      },
    } as unknown as KubeClient;
    return { client, patches, ci };
  }
  const CI = { group: 'crd.projectcalico.org', version: 'v1', plural: 'clusterinformations', kind: 'ClusterInformation', namespaced: false } as ResourceType;

  it('an unset datastoreReady is released to true, never back to unset (the CNI plugin dereferences it without a nil check)', async () => {
    const { client, patches, ci } = clusterInfo({});
    const lock = await lockDatastore(client, CI, new Reporter(new RecordingIoHost()));
    expect(ci.spec.datastoreReady).toBe(false);
    await lock!.release();
    expect(patches.at(-1).spec).toEqual({ datastoreReady: true });
  });

  it("a prior false (another tool's lock) stays false", async () => {
    const { client, ci } = clusterInfo({ datastoreReady: false });
    const lock = await lockDatastore(client, CI, new Reporter(new RecordingIoHost()));
    await lock!.release();
    expect(ci.spec.datastoreReady).toBe(false);
  });
});
