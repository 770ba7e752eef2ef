import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { KubeClient } from '../kube/client.js';
import type { ResourceResolver } from '../kube/resolver.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import { OwnerLookup } from './owners.js';
import { LiveIndex, planOne, type PlanContext } from './plan-object.js';
import { DesiredSpool } from './spool.js';
import { PhaseTimer } from './timings.js';
import { desiredOf, hasDesired, setDesired } from './types.js';

const HANDLE: ResourceType = { group: 'crd.projectcalico.org', version: 'v1', plural: 'ipamhandles', kind: 'IPAMHandle', namespaced: false };
const SECRET: ResourceType = { group: '', version: 'v1', plural: 'secrets', kind: 'Secret', namespaced: true };

/** The spool's open files, found through /proc (the spool keeps its descriptor to itself): /proc/self/fd/N and where it was. */
function spoolFiles(): { fd: string; target: string }[] {
  return fs
    .readdirSync('/proc/self/fd')
    .map((fd) => {
      try {
        return { fd: `/proc/self/fd/${fd}`, target: fs.readlinkSync(`/proc/self/fd/${fd}`) };
      } catch {
        return { fd, target: '' };
      }
    })
    .filter((f) => f.target.includes('cni-rewind-restore-'));
}

describe('the restore spool', () => {
  it('gives back each text where it put it, from a file only this user can read, gone from its folder at once, closed on close', () => {
    const before = spoolFiles().length;
    const spool = new DesiredSpool();
    const texts = ['{"a":1}', 'ünïcödé ✓', '', 'x'.repeat(100_000)];
    const slots = texts.map((t) => spool.put(t));
    expect(slots.map((s) => spool.get(s))).toEqual(texts);
    const files = spoolFiles();
    expect(files.length).toBe(before + 1);
    const file = files[files.length - 1]!;
    expect(fs.statSync(file.fd).mode & 0o777).toBe(0o600);
    // Removed from the folder while open: nothing is left behind however the process ends.
    expect(file.target).toMatch(/ \(deleted\)$/);
    expect(fs.existsSync(path.dirname(file.target))).toBe(false);
    spool.close();
    expect(spoolFiles().length).toBe(before);
    expect(() => spool.get(slots[0]!)).toThrow(/closed/);
    spool.close(); // twice is fine
  });

  it('makes no file for a restore that spools nothing', () => {
    const before = spoolFiles().length;
    const spool = new DesiredSpool();
    expect(spoolFiles().length).toBe(before);
    spool.close();
  });
});

describe('a plan entry', () => {
  const client = { listAll: async () => [], listItems: async function* () {}, getOrUndefined: async () => undefined } as unknown as KubeClient;
  const resolver = {
    forObject: async (o: KubeObject) => (o.kind === 'IPAMHandle' ? HANDLE : o.kind === 'Secret' ? SECRET : undefined),
    resolve: async () => undefined,
  } as unknown as ResourceResolver;
  const ctx = (spool: DesiredSpool): PlanContext => {
    const timer = new PhaseTimer();
    return {
      existing: 'update',
      liveCrds: new Map(),
      bundleCrds: new Map(),
      dropUnknownFields: false,
      inBundle: new Set(),
      liveIndex: new LiveIndex(client, timer),
      owners: new OwnerLookup(client, resolver),
      timer,
      spool,
    };
  };

  it("holds where its custom resource is in the spool, not the object's JSON, and gives the object back when written", async () => {
    const spool = new DesiredSpool();
    try {
      const handle: KubeObject = {
        apiVersion: 'crd.projectcalico.org/v1',
        kind: 'IPAMHandle',
        metadata: { name: 'k8s-pod-network.abc', resourceVersion: '12', uid: 'u' },
        spec: { handleID: 'k8s-pod-network.abc', block: { '10.0.0.0/26': 1 }, deleted: false },
      };
      const p = await planOne(client, resolver, handle, ctx(spool));
      expect(p.action.action).toBe('create');
      expect(p.desiredText).toBeUndefined();
      expect(hasDesired(p)).toBe(true);
      // Nothing of the object's content stays on the entry (what a plan of 100k entries would hold until the end).
      expect(JSON.stringify({ ...p, spool: undefined })).not.toContain('10.0.0.0/26');
      expect(desiredOf(p)).toEqual({ ...handle, metadata: { name: 'k8s-pod-network.abc' } });
      expect(spool.size).toBeGreaterThan(0);
      // A change made while executing (the datastore lock's ClusterInformation) is kept in memory from then on.
      setDesired(p, { ...desiredOf(p), spec: { ...handle.spec, deleted: true } });
      expect(p.desiredAt).toBeUndefined();
      expect(desiredOf(p).spec.deleted).toBe(true);
    } finally {
      spool.close();
    }
  });

  it("keeps a core object (a Secret's data) in memory: it is never written to the spool", async () => {
    const spool = new DesiredSpool();
    try {
      const secret: KubeObject = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 's', namespace: 'tigera-operator' }, data: { key: 'c2VjcmV0' } };
      const p = await planOne(client, resolver, secret, ctx(spool));
      expect(p.desiredAt).toBeUndefined();
      expect(desiredOf(p).data).toEqual({ key: 'c2VjcmV0' });
      expect(spool.size).toBe(0);
    } finally {
      spool.close();
    }
  });
});

describe('the live objects planning compares with', () => {
  const HANDLES: ResourceType = { group: 'crd.projectcalico.org', version: 'v1', plural: 'ipamhandles', kind: 'IPAMHandle', namespaced: false };
  const live = (name: string): KubeObject => ({
    apiVersion: 'crd.projectcalico.org/v1',
    kind: 'IPAMHandle',
    metadata: { name, resourceVersion: '5', uid: `u-${name}` },
    spec: { handleID: name, block: { '10.0.0.0/26': 1 } },
  });
  const listing = (objects: KubeObject[]) => {
    let lists = 0;
    const client = {
      async *listItems() {
        lists++;
        yield* objects.map((o) => structuredClone(o));
      },
    } as unknown as KubeClient;
    return { client, lists: () => lists };
  };

  it('are listed once per type, kept in the spool as text, and each asked-for one is parsed afresh from it', async () => {
    const spool = new DesiredSpool();
    try {
      const { client, lists } = listing([live('a'), live('b')]);
      const index = new LiveIndex(client, new PhaseTimer(), spool);
      const a = await index.get(HANDLES, undefined, 'a');
      expect(a).toEqual(live('a'));
      expect(await index.get(HANDLES, undefined, 'b')).toEqual(live('b'));
      expect(await index.get(HANDLES, undefined, 'c')).toBeUndefined();
      expect(lists()).toBe(1);
      expect(spool.size).toBeGreaterThan(0);
      // A copy of its own each time: a change planning makes to one is not seen by the next.
      a!.spec.handleID = 'changed';
      expect((await index.get(HANDLES, undefined, 'a'))!.spec.handleID).toBe('a');
      index.close();
      expect(() => spool.read(0, 1)).toThrow(/closed/);
    } finally {
      spool.close();
    }
  });
});
