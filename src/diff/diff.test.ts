import { describe, expect, it } from 'vitest';
import { normalizedYaml, pairMoved, type DiffResult } from './diff.js';

describe('normalizedYaml', () => {
  it('is equal for the same object whatever the key order and server fields', () => {
    const a = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', uid: '1', resourceVersion: '5' }, data: { b: '2', a: '1' } };
    const b = { kind: 'ConfigMap', data: { a: '1', b: '2' }, metadata: { resourceVersion: '9', name: 'x', uid: '2' }, apiVersion: 'v1' };
    expect(normalizedYaml(a as any)).toBe(normalizedYaml(b as any));
    expect(normalizedYaml(a as any)).not.toMatch(/uid|resourceVersion/);
  });
  it('differs when a user-set value differs', () => {
    const a = { apiVersion: 'v1', kind: 'X', metadata: { name: 'x' }, spec: { disabled: true } };
    const b = { ...a, spec: { disabled: false } };
    expect(normalizedYaml(a as any)).not.toBe(normalizedYaml(b as any));
  });
});

describe('pairMoved: a default-tier policy Calico renamed is the same policy (3.32 naming)', () => {
  const gnp = (name: string, selector = 'all()', tier?: string) => ({
    apiVersion: 'crd.projectcalico.org/v1',
    kind: 'GlobalNetworkPolicy',
    metadata: { name },
    spec: { selector, ...(tier ? { tier } : {}) },
  });
  const empty = (): DiffResult => ({ onlyInBundle: [], onlyInCluster: [], changed: [], moved: [], same: 0, compared: [] });

  it('default.deny in the bundle and deny live: the same when equal, changed when not, never moved or lost', () => {
    const same = empty();
    pairMoved([{ path: 'b/default.deny.yaml', object: gnp('default.deny') }], [gnp('deny')], same);
    expect(same).toMatchObject({ same: 1, changed: [], moved: [], onlyInBundle: [], onlyInCluster: [] });

    const changed = empty();
    pairMoved([{ path: 'b/deny.yaml', object: gnp('deny', 'a == "1"') }], [gnp('default.deny', 'a == "2"')], changed);
    expect(changed.changed).toHaveLength(1);
    expect(changed.changed[0]!.ref).toMatchObject({ kind: 'GlobalNetworkPolicy', name: 'default.deny' });
    expect(changed.changed[0]!.diff).toContain('-  selector: a == "1"');
    expect(changed).toMatchObject({ same: 0, moved: [], onlyInBundle: [], onlyInCluster: [] });
  });

  it('another tier, another kind or another name: as before (moved, or on one side)', () => {
    const tiered = empty();
    pairMoved([{ path: 'b/x', object: gnp('security.deny', 'a == "1"', 'security') }], [gnp('deny', 'a == "2"', 'security')], tiered);
    expect(tiered.changed).toEqual([]);
    expect(tiered.onlyInBundle).toHaveLength(1);
    expect(tiered.onlyInCluster).toHaveLength(1);

    const other = empty();
    pairMoved([{ path: 'b/x', object: gnp('default.deny', 'a == "1"') }], [gnp('allow', 'a == "2"')], other);
    expect(other.onlyInBundle).toHaveLength(1);
    expect(other.onlyInCluster).toHaveLength(1);

    const pool = { apiVersion: 'crd.projectcalico.org/v1', kind: 'IPPool', metadata: { name: 'default.p' }, spec: { cidr: '10.0.0.0/16' } };
    const moved = empty();
    pairMoved([{ path: 'b/x', object: pool }], [{ ...pool, metadata: { name: 'p' } }], moved);
    expect(moved.moved).toHaveLength(1);
  });
});
