import { describe, expect, it } from 'vitest';
import { RecordingIoHost, Reporter } from '../io/host.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import type { ResourceResolver } from '../kube/resolver.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import { findDrift, type DriftTarget } from './drift.js';

const HANDLE: ResourceType = { group: 'crd.projectcalico.org', version: 'v1', plural: 'ipamhandles', kind: 'IPAMHandle', namespaced: false };
const handle = (i: number, block = '10.0.0.0/26'): KubeObject => ({
  apiVersion: 'crd.projectcalico.org/v1',
  kind: 'IPAMHandle',
  metadata: { name: `h-${i}` },
  spec: { handleID: `h-${i}`, block: { [block]: 1 } },
});
const target = (o: KubeObject): DriftTarget => ({ action: { id: `IPAMHandle ${o.metadata.name}` }, desired: o, type: HANDLE });

/** A cluster that holds `live` and records the requests made to it; the list fails with 410 after `failAfterPages`. */
function fakeClient(live: KubeObject[], failAfterPages?: number) {
  const calls: string[] = [];
  const server = (o: KubeObject) => ({ ...structuredClone(o), metadata: { ...o.metadata, uid: 'u', resourceVersion: '7', managedFields: [] } });
  const client = {
    async *listPages(_t: ResourceType, opts: { limit?: number }) {
      const limit = opts.limit ?? 500;
      for (let i = 0, page = 0; i < live.length; i += limit, page++) {
        calls.push('LIST');
        if (failAfterPages !== undefined && page >= failAfterPages) throw new KubeApiError(410, 'Expired', 'continue token expired', 'GET', '/x');
        // Items of a list page: server fields added, as the API server sends them.
        yield { items: live.slice(i, i + limit).map(server) };
      }
    },
    async getOrUndefined(_t: ResourceType, _ns: string | undefined, name: string) {
      calls.push(`GET ${name}`);
      const o = live.find((x) => x.metadata.name === name);
      return o ? server(o) : undefined;
    },
  };
  return { client: client as unknown as KubeClient, calls };
}
const resolver = { forObject: async () => HANDLE } as unknown as ResourceResolver;
const reporter = () => new Reporter(new RecordingIoHost());

describe('findDrift', () => {
  it('reads many objects of one type back with a paged list (no GET each) and reports what changed or went', async () => {
    const written = Array.from({ length: 2_400 }, (_, i) => handle(i)); // 1000 per page
    const live = written.filter((o) => o.metadata.name !== 'h-7').map((o) => (o.metadata.name === 'h-3' ? handle(3, '10.9.9.0/26') : o));
    const { client, calls } = fakeClient(live);
    const targets = written.map(target);
    const drifted = await findDrift(client, resolver, targets, 4, reporter());
    expect(calls).toEqual(['LIST', 'LIST', 'LIST']);
    expect(drifted.map((d) => d.id).sort()).toEqual(['IPAMHandle h-3', 'IPAMHandle h-7']);
    expect(targets.find((t) => t.action.id === 'IPAMHandle h-7')!.action.drift).toEqual(['(object is gone)']);
    expect(targets.find((t) => t.action.id === 'IPAMHandle h-3')!.action.drift!.join(' ')).toMatch(/spec\.block/);
  });

  it('a few objects: one GET each', async () => {
    const written = [handle(1), handle(2)];
    const { client, calls } = fakeClient(written);
    expect(await findDrift(client, resolver, written.map(target), 4, reporter())).toEqual([]);
    expect(calls.sort()).toEqual(['GET h-1', 'GET h-2']);
  });

  it('a list whose continue token expires falls back to GETs for the objects it had not reached', async () => {
    const written = Array.from({ length: 120 }, (_, i) => handle(i));
    const live = written.map((o) => (o.metadata.name === 'h-110' ? handle(110, '10.9.9.0/26') : o));
    const { client, calls } = fakeClient(live, 1);
    const origList = (client as any).listPages;
    (client as any).listPages = (t: ResourceType) => origList(t, { limit: 100 });
    const drifted = await findDrift(client, resolver, written.map(target), 4, reporter());
    expect(calls.filter((c) => c === 'LIST')).toHaveLength(2);
    expect(calls.filter((c) => c.startsWith('GET'))).toHaveLength(20);
    expect(drifted.map((d) => d.id)).toEqual(['IPAMHandle h-110']);
  });
});
