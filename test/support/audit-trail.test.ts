import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AUDIT_LOG } from '../../src/dev/local-cluster/audit-policy.js';
import { auditTrail, blockName } from './audit-trail.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-audit-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const event = (t: string, verb: string, resource: string, name: string, agent: string, code = 200) =>
  JSON.stringify({
    requestReceivedTimestamp: t,
    verb,
    userAgent: `${agent} (linux/amd64) kubernetes/$Format`,
    objectRef: { resource, name },
    responseStatus: { code },
  });

describe('auditTrail', () => {
  it("names each write to the wanted objects with its program, and only those (not a name's prefix)", () => {
    writeFileSync(
      path.join(dir, AUDIT_LOG),
      [
        event('2026-12-05T03:39:40Z', 'update', 'ipamblocks', '192-168-217-192-26', 'ipam-driver/v0.0.0'),
        event('2026-12-05T03:39:41Z', 'update', 'ipamblocks', '192-168-217-192-260', 'other/v1'),
        event('2026-12-05T03:39:42Z', 'delete', 'ipamhandles', 'k8s-pod-network.abc', 'calico-kube-controllers/v0.0.0', 409),
        '',
      ].join('\n'),
    );
    expect(auditTrail(dir, ['192-168-217-192-26', 'K8S-POD-NETWORK.abc'])).toEqual([
      '2026-12-05T03:39:40Z update ipamblocks/192-168-217-192-26 -> 200 by ipam-driver/v0.0.0',
      '2026-12-05T03:39:42Z delete ipamhandles/k8s-pod-network.abc -> 409 by calico-kube-controllers/v0.0.0',
    ]);
  });
  it('says so when the cluster has no audit log', () => {
    expect(auditTrail(path.join(dir, 'none'), ['x'])[0]).toMatch(/^no audit log at /);
  });
  it('spells a block as the Kubernetes datastore names it', () => {
    expect(blockName('192.168.217.192/26')).toBe('192-168-217-192-26');
  });
});
