import { describe, expect, it } from 'vitest';
import type { KubeObject, ResourceType } from '../kube/types.js';
import { PlanTable, extendPlan, withActions } from './plan-table.js';
import { DesiredSpool } from './spool.js';
import { desiredOf, idOf, refOf, type Planned, type RestoreActionKind } from './types.js';

const HANDLE: ResourceType = { group: 'crd.projectcalico.org', version: 'v1', plural: 'ipamhandles', kind: 'IPAMHandle', namespaced: false };
const POLICY: ResourceType = { group: 'crd.projectcalico.org', version: 'v1', plural: 'networkpolicies', kind: 'NetworkPolicy', namespaced: true };

const handle = (name: string): KubeObject => ({ apiVersion: 'crd.projectcalico.org/v1', kind: 'IPAMHandle', metadata: { name }, spec: { handleID: name } });
const policy = (ns: string, name: string): KubeObject => ({
  apiVersion: 'crd.projectcalico.org/v1',
  kind: 'NetworkPolicy',
  metadata: { name, namespace: ns },
  spec: {},
});

/** An entry as planOne makes it: its object spooled. */
function entry(spool: DesiredSpool, o: KubeObject, type: ResourceType, action: RestoreActionKind, rank: number, phase = 'ipam'): Planned {
  const slot = spool.put(JSON.stringify(o));
  return { action: { ref: refOf(o), id: idOf(o), phase, action }, desiredAt: slot.offset, desiredBytes: slot.length, spool, type, rank };
}

describe('the plan table', () => {
  it('keeps creates and unchanged objects as rows and gives back the same entries, objects and actions', () => {
    const spool = new DesiredSpool();
    try {
      const table = new PlanTable(spool);
      const made = [
        entry(spool, handle('h1'), HANDLE, 'create', 5),
        entry(spool, policy('ns1', 'p1'), POLICY, 'unchanged', 900, 'policy'),
        entry(spool, handle('h2'), HANDLE, 'create', 5),
      ];
      const expected = made.map((p) => structuredClone(p.action));
      for (const p of made) table.add(p);
      // 300 of them grow the columns past their first size.
      for (let i = 3; i < 300; i++) table.add(entry(spool, handle(`h${i}`), HANDLE, 'create', 5));
      expect(table.size).toBe(300);
      expect(table.kept()).toEqual([]);
      expect(table.actions().slice(0, 3)).toEqual(expected);
      expect(desiredOf(table.get(1))).toEqual(policy('ns1', 'p1'));
      expect(desiredOf(table.get(299))).toEqual(handle('h299'));
      expect(table.get(0).type).toEqual(HANDLE);
      expect(table.refAt(1)).toEqual({ apiVersion: 'crd.projectcalico.org/v1', kind: 'NetworkPolicy', namespace: 'ns1', name: 'p1' });
      expect(table.counts()).toEqual({ create: 299, unchanged: 1 });
    } finally {
      spool.close();
    }
  });

  it('keeps an entry with something to say as the object itself, and a row again once it has nothing more to say', () => {
    const spool = new DesiredSpool();
    try {
      const table = new PlanTable(spool);
      const refused: Planned = { action: { ...entry(spool, handle('r'), HANDLE, 'refused', 5).action, reason: 'not Calico' }, rank: 5 };
      table.add(entry(spool, handle('a'), HANDLE, 'create', 5));
      table.add(refused);
      expect(table.kept()).toEqual([refused]);
      expect(table.get(1)).toBe(refused);

      // A write that failed is kept with its error; one that was done is a row with its outcome.
      const failed = table.get(0);
      failed.action.outcome = 'failed';
      failed.action.error = 'boom';
      table.set(0, failed);
      expect(table.kept()).toEqual([failed, refused]);
      const done = table.get(0);
      delete done.action.error;
      done.action.outcome = 'done';
      table.set(0, done);
      expect(table.kept()).toEqual([refused]);
      expect(table.outcomeAt(0)).toBe('done');
      expect(table.actions()[0]).toEqual({ ...entry(spool, handle('a'), HANDLE, 'create', 5).action, outcome: 'done' });

      // Held in memory (a core object), with a live object or notes: never a row.
      const inMemory: Planned = {
        action: { ref: refOf(handle('m')), id: idOf(handle('m')), phase: 'ipam', action: 'create' },
        desiredText: '{}',
        type: HANDLE,
        rank: 5,
      };
      const withNotes = entry(spool, handle('n'), HANDLE, 'create', 5);
      withNotes.action.notes = ['a note'];
      const withLive = { ...entry(spool, handle('l'), HANDLE, 'unchanged', 5), live: handle('l') };
      for (const p of [inMemory, withNotes, withLive]) table.add(p);
      expect(table.kept()).toEqual([refused, inMemory, withNotes, withLive]);
    } finally {
      spool.close();
    }
  });

  it('orders by rank, then by id as localeCompare does, keeping each entry with its row or object', () => {
    const spool = new DesiredSpool();
    try {
      const table = new PlanTable(spool);
      const names = ['b', 'A', 'a', 'c-1', 'c10', 'c2', '_x'];
      const made = names.map((n, i) => entry(spool, handle(n), HANDLE, 'create', i % 2 ? 7 : 5));
      made[3]!.action.notes = ['kept as an object'];
      for (const p of made) table.add(p);
      table.sort();
      const expected = [...made].sort((a, b) => a.rank - b.rank || a.action.id.localeCompare(b.action.id));
      expect(table.actions().map((a) => a.id)).toEqual(expected.map((p) => p.action.id));
      expect(table.kept()).toEqual([made[3]]);
      expect(table.actions().map((_, i) => desiredOf(table.get(i)).metadata.name)).toEqual(expected.map((p) => p.action.ref.name));
    } finally {
      spool.close();
    }
  });

  it("keeps each row's name and namespace through growth and sorting (UTF-8 names, more bytes than the first buffer)", () => {
    const spool = new DesiredSpool();
    try {
      const table = new PlanTable(spool);
      const objs = Array.from({ length: 1_000 }, (_, i) => policy(['ns-a', 'ns-b', 'ns-ü'][i % 3]!, `pölicy-${'x'.repeat(i % 50)}-${999 - i}`));
      for (const o of objs) table.add(entry(spool, o, POLICY, 'create', 5, 'policy'));
      table.sort();
      const refs = Array.from({ length: table.size }, (_, i) => table.refAt(i));
      expect(refs.map((r) => `${r.namespace}/${r.name}`).sort()).toEqual(objs.map((o) => `${o.metadata.namespace}/${o.metadata.name}`).sort());
      expect(refs.map((_, i) => desiredOf(table.get(i)).metadata)).toEqual(refs.map((r) => ({ namespace: r.namespace, name: r.name })));
    } finally {
      spool.close();
    }
  });

  it('lists the actions in JSON and in a spread, and extends a plan without building them', () => {
    let built = 0;
    const table = { actions: () => (built++, [{ ref: refOf(handle('h')), id: 'IPAMHandle h', phase: 'ipam', action: 'create' as const }]) };
    const plan = withActions({ dryRun: false, counts: { create: 1 } }, table);
    const result = extendPlan(plan, { ok: true });
    expect(built).toBe(0);
    expect(JSON.parse(JSON.stringify(result))).toEqual({
      dryRun: false,
      counts: { create: 1 },
      actions: [{ ref: { apiVersion: 'crd.projectcalico.org/v1', kind: 'IPAMHandle', name: 'h' }, id: 'IPAMHandle h', phase: 'ipam', action: 'create' }],
      ok: true,
    });
    expect({ ...result }.actions).toHaveLength(1);
    // Built once while someone holds the array.
    const held = result.actions;
    expect(result.actions).toBe(held);
  });
});
