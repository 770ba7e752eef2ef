/**
 * Adoption by equality as the tigera operator does it (calico/pool-conversion.ts): `FromProjectCalicoV1` of the pool
 * against the entry after `fillDefaults`, compared with Go's reflect.DeepEqual. Each case is a rule read in
 * tigera/operator v1.34.3 / v1.36.16 / v1.38.13 (installation_types.go, ippool/defaults.go, pool_controller.go).
 */
import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../../kube/types.js';
import { adoptionReason } from './pools.js';

/** A pool as libcalico-go stores it (its defaults: all(), 26, [Workload, Tunnel], modes Never unless set). */
const pool = (spec: Record<string, unknown> = {}, name = 'default-ipv4-ippool'): KubeObject => ({
  apiVersion: 'crd.projectcalico.org/v1',
  kind: 'IPPool',
  metadata: { name },
  spec: {
    cidr: '192.168.0.0/16',
    ipipMode: 'Always',
    vxlanMode: 'Never',
    natOutgoing: true,
    nodeSelector: 'all()',
    blockSize: 26,
    allowedUses: ['Workload', 'Tunnel'],
    ...spec,
  },
});
const adopts = (p: KubeObject, entry: Record<string, unknown>, version: string, cni?: string) => adoptionReason(p, [entry], version, cni) !== undefined;

describe('adoption by equality, per operator minor', () => {
  it('an entry with only its cidr equals a pool with the defaults it is filled with (name from the pool, IPIP for Calico CNI)', () => {
    for (const v of ['v3.28.1', 'v3.29.7', 'v3.30.7']) expect(adopts(pool({ assignmentMode: 'Automatic' }), { cidr: '192.168.0.0/16' }, v)).toBe(true);
    // Another CNI plugin: a v4 entry defaults to encapsulation None, which an IPIP pool is not.
    expect(adopts(pool(), { cidr: '192.168.0.0/16' }, 'v3.28.1', 'AmazonVPC')).toBe(false);
  });

  it('a pool without encapsulation (Never/Never) converts to "" and equals no entry, not even encapsulation None', () => {
    const none = pool({ ipipMode: 'Never', vxlanMode: 'Never' });
    for (const v of ['v3.28.1', 'v3.29.7', 'v3.30.7']) {
      expect(adopts(none, { cidr: '192.168.0.0/16', encapsulation: 'None' }, v)).toBe(false);
      expect(adopts(none, { cidr: '192.168.0.0/16' }, v)).toBe(false);
    }
  });

  it('VXLAN wins over IPIP in the conversion, as in the Go switch order', () => {
    const both = pool({ ipipMode: 'Always', vxlanMode: 'CrossSubnet' });
    expect(adopts(both, { cidr: '192.168.0.0/16', encapsulation: 'VXLANCrossSubnet' }, 'v3.28.1')).toBe(true);
    expect(adopts(both, { cidr: '192.168.0.0/16', encapsulation: 'IPIP' }, 'v3.28.1')).toBe(false);
  });

  it('natOutgoing false converts to "" on v1.34 (no entry equals it) and to Disabled from v1.36', () => {
    const noNat = pool({ natOutgoing: false });
    const entry = { cidr: '192.168.0.0/16', natOutgoing: 'Disabled' };
    expect(adopts(noNat, entry, 'v3.28.1')).toBe(false);
    expect(adopts(noNat, entry, 'v3.29.7')).toBe(true);
  });

  it('allowedUses is compared in order', () => {
    const reversed = pool({ allowedUses: ['Tunnel', 'Workload'] });
    expect(adopts(reversed, { cidr: '192.168.0.0/16' }, 'v3.28.1')).toBe(false);
    expect(adopts(reversed, { cidr: '192.168.0.0/16', allowedUses: ['Tunnel', 'Workload'] }, 'v3.28.1')).toBe(true);
  });

  it('disabled takes part from v1.36 (as disableNewAllocations, an entry defaults to false); v1.34 ignores it and the entry field', () => {
    const disabled = pool({ disabled: true });
    expect(adopts(disabled, { cidr: '192.168.0.0/16' }, 'v3.28.1')).toBe(true);
    expect(adopts(disabled, { cidr: '192.168.0.0/16', disableNewAllocations: true }, 'v3.28.1')).toBe(true);
    expect(adopts(disabled, { cidr: '192.168.0.0/16' }, 'v3.29.7')).toBe(false);
    expect(adopts(disabled, { cidr: '192.168.0.0/16', disableNewAllocations: true }, 'v3.29.7')).toBe(true);
    expect(adopts(pool(), { cidr: '192.168.0.0/16', disableNewAllocations: true }, 'v3.29.7')).toBe(false);
  });

  it('assignmentMode takes part from v1.38 (an entry defaults to Automatic): a pool written before 3.30 has none', () => {
    expect(adopts(pool(), { cidr: '192.168.0.0/16' }, 'v3.29.7')).toBe(true);
    expect(adopts(pool(), { cidr: '192.168.0.0/16' }, 'v3.30.7')).toBe(false);
    expect(adopts(pool({ assignmentMode: 'Automatic' }), { cidr: '192.168.0.0/16' }, 'v3.30.7')).toBe(true);
    expect(adopts(pool({ assignmentMode: 'Manual' }), { cidr: '192.168.0.0/16', assignmentMode: 'Manual' }, 'v3.30.7')).toBe(true);
  });

  it("every other field is compared exactly: name, blockSize, nodeSelector, disableBGPExport; a missing pool value is Go's zero", () => {
    const entry = { cidr: '192.168.0.0/16' };
    expect(adopts(pool({}, 'legacy'), { ...entry, name: 'default-ipv4-ippool' }, 'v3.28.1')).toBe(false);
    expect(adopts(pool({ blockSize: 24 }), entry, 'v3.28.1')).toBe(false);
    expect(adopts(pool({ blockSize: undefined }), entry, 'v3.28.1')).toBe(false);
    expect(adopts(pool({ nodeSelector: undefined }), entry, 'v3.28.1')).toBe(false);
    expect(adopts(pool({ disableBGPExport: true }), entry, 'v3.28.1')).toBe(false);
    expect(adopts(pool({ disableBGPExport: true }), { ...entry, disableBGPExport: true }, 'v3.28.1')).toBe(true);
  });

  it('IPv6 entries default to encapsulation None, natOutgoing Disabled and /122 blocks', () => {
    const v6 = pool({ cidr: 'fd00::/48', ipipMode: 'Never', vxlanMode: 'Always', natOutgoing: false, blockSize: 122 }, 'default-ipv6-ippool');
    expect(adopts(v6, { cidr: 'fd00::/48', encapsulation: 'VXLAN' }, 'v3.29.7')).toBe(true);
    expect(adopts(v6, { cidr: 'fd00::/48', encapsulation: 'VXLAN' }, 'v3.28.1')).toBe(false);
  });

  it("the managed-by label makes a pool the operator's whatever the entries say", () => {
    const labelled = pool({ ipipMode: 'Never' });
    labelled.metadata.labels = { 'app.kubernetes.io/managed-by': 'tigera-operator' };
    expect(adoptionReason(labelled, [], 'v3.28.1')).toMatch(/label/);
  });
});
