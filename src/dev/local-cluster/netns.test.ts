import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { deleteNetns, ensureNetns, listNetns, netnsPrefix } from './netns.js';

// Real namespaces (`ip netns`, as root, as the node side makes them), named as two clusters of one machine name theirs:
// slot 1 is `<name>`, slot N `<name>-N` (test/support/e2e-clusters.ts).
const cluster = `ut${randomBytes(3).toString('hex')}`;
const mine = `${netnsPrefix(cluster)}n-${randomBytes(6).toString('hex')}`;
const slot2 = `${netnsPrefix(`${cluster}-2`)}n-${randomBytes(6).toString('hex')}`;

afterAll(() => {
  for (const ns of [mine, slot2]) deleteNetns(ns);
});

describe('a cluster’s network namespaces', () => {
  it('are its own only: removing them (stopCalico, down) leaves those of the cluster whose name extends it', () => {
    ensureNetns(mine);
    ensureNetns(slot2);
    expect(listNetns(netnsPrefix(cluster))).toEqual([mine]);
    for (const ns of listNetns(netnsPrefix(cluster))) deleteNetns(ns);
    expect(listNetns(netnsPrefix(`${cluster}-2`))).toEqual([slot2]);
  });

  it('ensureNetns says whether it made the namespace (a bridge running in the one it replaces is not in it)', () => {
    const ns = `${netnsPrefix(cluster)}n-${randomBytes(6).toString('hex')}`;
    try {
      expect(ensureNetns(ns)).toBe(true);
      expect(ensureNetns(ns)).toBe(false);
      expect(execFileSync('ip', ['-n', ns, '-o', 'link', 'show', 'lo'], { encoding: 'utf8' })).toMatch(/UP/);
    } finally {
      deleteNetns(ns);
    }
  });
});
