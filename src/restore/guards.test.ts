import { describe, expect, it } from 'vitest';
import { RecordingIoHost, Reporter } from '../io/host.js';
import type { KubeClient } from '../kube/client.js';
import type { KubeObject } from '../kube/types.js';
import { pauseOperator } from './guards.js';

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
