import { describe, expect, it } from 'vitest';
import { rollingOrder } from './rolling-nodes.js';
import { stepsFor } from './plan.js';
import type { Release } from '../calico/release.js';

const node = (name: string, labels: Record<string, string> = {}) => ({ apiVersion: 'v1', kind: 'Node', metadata: { name, labels } });

describe('rolling reboot order and placement', () => {
  it('reboots workers first (by name), control-plane nodes last', () => {
    const order = rollingOrder([
      node('cp-1', { 'node-role.kubernetes.io/control-plane': '' }),
      node('w-b'),
      node('old-master', { 'node-role.kubernetes.io/master': '' }),
      node('w-a'),
    ]);
    expect(order.map((n) => n.metadata.name)).toEqual(['w-a', 'w-b', 'cp-1', 'old-master']);
  });

  it('puts reboot-nodes last, after the data is verified, for every strategy and install type', () => {
    const target = { version: 'v3.27.4', calicoManifest: [] } as unknown as Release;
    for (const [install, strategy] of [
      ['operator', 'in-place'],
      ['operator', 'reinstall'],
      ['manifest', 'in-place'],
    ] as const) {
      const ids = stepsFor(install, strategy, target, { rebootNodes: true }).map((s) => s.id);
      expect(ids.at(-1), `${install}/${strategy}`).toBe('reboot-nodes');
      expect(ids.at(-2)).toBe('verify-data');
      expect(stepsFor(install, strategy, target).map((s) => s.id)).not.toContain('reboot-nodes');
    }
  });
});
