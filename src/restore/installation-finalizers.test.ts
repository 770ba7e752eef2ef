import { describe, expect, it } from 'vitest';
import type { KubeClient } from '../kube/client.js';
import type { ResourceResolver } from '../kube/resolver.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import { OwnerLookup } from './owners.js';
import { LiveIndex, planOne, type PlanContext } from './plan-object.js';
import { PhaseTimer } from './timings.js';
import { desiredOf } from './types.js';
import { V138_INSTALLATION_FINALIZERS } from '../../test/support/doctor-state.js';

const INSTALLATION: ResourceType = { group: 'operator.tigera.io', version: 'v1', plural: 'installations', kind: 'Installation', namespaced: false };
const OWN = 'example.com/backup-hold';
/** Installation `default` as a 3.30 cluster holds it: the v1.38 operator's five finalizers and one of another tool. */
const bundled = (): KubeObject => ({
  apiVersion: 'operator.tigera.io/v1',
  kind: 'Installation',
  metadata: {
    name: 'default',
    uid: 'old',
    resourceVersion: '7',
    finalizers: [...V138_INSTALLATION_FINALIZERS, OWN],
  },
  spec: { variant: 'Calico' },
});
const V136 = ['tigera.io/operator-cleanup', 'operator.tigera.io/installation-controller', 'operator.tigera.io/apiserver-controller', OWN];

async function plan(operatorImage: string | undefined, live: KubeObject[] = [], obj = bundled()) {
  const client = {
    listAll: async () => live,
    async *listItems() {
      yield* live;
    },
    getOrUndefined: async () => undefined,
  } as unknown as KubeClient;
  const resolver = { forObject: async () => INSTALLATION, resolve: async () => undefined } as unknown as ResourceResolver;
  const timer = new PhaseTimer();
  const ctx: PlanContext = {
    existing: 'update',
    liveCrds: new Map(),
    bundleCrds: new Map(),
    dropUnknownFields: false,
    operatorImage,
    inBundle: new Set(),
    liveIndex: new LiveIndex(client, timer),
    owners: new OwnerLookup(client, resolver),
    timer,
  };
  return planOne(client, resolver, obj, ctx);
}

describe("restore writes Installation default with the running operator's own finalizers only (issue 30)", () => {
  it('a 3.30 bundle under the 3.29 operator (v1.36.16): without the whisker and goldmane finalizers nothing would ever remove', async () => {
    const p = await plan('quay.io/tigera/operator:v1.36.16');
    expect(p.action.action).toBe('create');
    expect(desiredOf(p).metadata.finalizers).toEqual(V136);
    expect(p.action.notes?.join(' ')).toMatch(/operator\.tigera\.io\/whisker-controller, operator\.tigera\.io\/goldmane-controller/);
  });

  it('an Installation that differs from the bundle only in those finalizers is unchanged', async () => {
    const live: KubeObject = { ...bundled(), metadata: { name: 'default', uid: 'new', resourceVersion: '9', finalizers: V136 } };
    expect((await plan('quay.io/tigera/operator:v1.36.16', [live])).action.action).toBe('unchanged');
  });

  it("with none of the bundle's left, writes none: an update then keeps the live finalizers (write.ts)", async () => {
    const only: KubeObject = { ...bundled(), metadata: { name: 'default', finalizers: ['operator.tigera.io/whisker-controller'] } };
    expect(desiredOf(await plan('quay.io/tigera/operator:v1.36.16', [], only)).metadata).toEqual({ name: 'default' });
  });

  it("an older bundle under a newer operator keeps the running operator's live finalizers: a 3.27 bundle under v1.36 is unchanged (issue 30)", async () => {
    // Written without them, v1.36 would put them back once resumed: drift in the read-back, and an update on every restore.
    const v132: KubeObject = { ...bundled(), metadata: { name: 'default', finalizers: ['tigera.io/operator-cleanup', OWN] } };
    const live: KubeObject = { ...bundled(), metadata: { name: 'default', uid: 'new', resourceVersion: '9', finalizers: V136 } };
    const p = await plan('quay.io/tigera/operator:v1.36.16', [live], v132);
    expect(p.action.action).toBe('unchanged');
    expect(desiredOf(p).metadata.finalizers).toEqual(V136);
  });

  it('keeps them all under the 3.30 operator', async () => {
    expect(desiredOf(await plan('quay.io/tigera/operator:v1.38.13')).metadata.finalizers).toEqual(bundled().metadata.finalizers);
  });

  it("writes none of the bundle's operator finalizers under an operator of no known generation or none (never another operator's)", async () => {
    for (const image of ['quay.io/tigera/operator:my-build', undefined]) {
      const p = await plan(image);
      expect(desiredOf(p).metadata.finalizers, String(image)).toEqual([OWN]);
      expect(p.action.notes?.join(' '), String(image)).toMatch(/operator\.tigera\.io\/whisker-controller/);
    }
  });

  it('under an operator of no known generation, an update keeps every live operator finalizer and adds none', async () => {
    const live: KubeObject = { ...bundled(), metadata: { name: 'default', uid: 'new', resourceVersion: '9', finalizers: ['tigera.io/operator-cleanup'] } };
    const p = await plan('quay.io/tigera/operator:my-build', [live]);
    expect(desiredOf(p).metadata.finalizers).toEqual(['tigera.io/operator-cleanup', OWN]);
  });
});
