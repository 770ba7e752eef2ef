import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../kube/types.js';
import { comparable, missingFrom, objectDiff, sameContent } from './normalize.js';
import { phaseOf } from './order.js';
import { keepOperatorFilledFelixFields } from './plan-object.js';

const calico = (kind: string, name = 'x', spec: unknown = {}): KubeObject => ({ apiVersion: 'crd.projectcalico.org/v1', kind, metadata: { name }, spec });

describe('restore order', () => {
  it('follows issue 29: config, operator, ClusterInformation, IPAM (blocks, handles, affinities), pools, BGP/Felix, sets, policies, the rest', () => {
    const objs: KubeObject[] = [
      calico('GlobalNetworkPolicy'),
      calico('IPAMHandle'),
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c', namespace: 'tigera-operator' } },
      calico('FelixConfiguration'),
      calico('Tier'),
      calico('IPPool'),
      calico('SomethingNew'),
      calico('IPAMBlock'),
      calico('ClusterInformation'),
      { apiVersion: 'operator.tigera.io/v1', kind: 'Installation', metadata: { name: 'default' } },
      calico('GlobalNetworkSet'),
      calico('BlockAffinity'),
      calico('IPAMConfig'),
      calico('IPReservation'),
    ];
    const sorted = [...objs].sort((a, b) => phaseOf(a).rank - phaseOf(b).rank).map((o) => o.kind);
    expect(sorted).toEqual([
      'ConfigMap',
      'Installation',
      'ClusterInformation',
      'IPAMConfig',
      'IPAMBlock',
      'IPAMHandle',
      'BlockAffinity',
      'IPPool',
      'IPReservation',
      'FelixConfiguration',
      'GlobalNetworkSet',
      'Tier',
      'GlobalNetworkPolicy',
      'SomethingNew',
    ]);
    expect(phaseOf(calico('IPAMBlock')).phase.datastoreLock).toBe(true);
    expect(phaseOf(calico('IPPool')).phase.datastoreLock).toBe(true); // pools too: calico-node would allocate tunnel addresses from them
  });
});

describe('comparing bundle and cluster objects', () => {
  const bundle: KubeObject = {
    ...calico('IPPool', 'p', { cidr: '10.0.0.0/16', disabled: true }),
    metadata: { name: 'p', uid: 'old', resourceVersion: '5', ownerReferences: [{ apiVersion: 'v1', kind: 'Namespace', name: 'n', uid: 'old-owner' }] },
  };
  const live: KubeObject = {
    ...calico('IPPool', 'p', { disabled: true, cidr: '10.0.0.0/16' }),
    metadata: {
      name: 'p',
      uid: 'new',
      resourceVersion: '99',
      creationTimestamp: 't',
      managedFields: [{}],
      ownerReferences: [{ apiVersion: 'v1', kind: 'Namespace', name: 'n', uid: 'new-owner' }],
    },
  };

  it('ignores server fields, key order and owner UIDs', () => {
    expect(sameContent(bundle, live)).toBe(true);
    expect(comparable(live).metadata).toEqual({ name: 'p', ownerReferences: [{ apiVersion: 'v1', kind: 'Namespace', name: 'n', uid: '' }] });
  });

  it('shows a change as a diff from the cluster to the bundle', () => {
    const edited = structuredClone(live);
    edited.spec.disabled = false;
    expect(sameContent(bundle, edited)).toBe(false);
    const d = objectDiff(edited, bundle, 'IPPool p');
    expect(d).toMatch(/-\s+disabled: false\n\+\s+disabled: true/);
  });

  it('never shows Secret values in a diff, only that they changed', () => {
    const secret = (v: string): KubeObject => ({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 's', namespace: 'calico-system' },
      data: { key: Buffer.from(v).toString('base64') },
    });
    const d = objectDiff(secret('old-secret-value'), secret('new-secret-value'), 'Secret calico-system/s');
    expect(d).toMatch(/-\s+key: <secret value, fingerprint [0-9a-f]{12}>\n\+\s+key: <secret value, fingerprint [0-9a-f]{12}>/);
    for (const v of ['old-secret-value', 'new-secret-value']) expect(d).not.toContain(Buffer.from(v).toString('base64'));
  });

  it('drift: fields the server added are fine, changed or missing ones are reported', () => {
    expect(missingFrom({ spec: { a: 1 } }, { spec: { a: 1, defaulted: true } })).toEqual([]);
    expect(missingFrom({ spec: { a: 1, l: [1, 2] } }, { spec: { a: 2, l: [1] } })).toEqual(['spec.a', 'spec.l']);
  });
});

describe('FelixConfiguration fields the running operator fills in', () => {
  const felix = (spec: Record<string, unknown>): KubeObject => ({
    apiVersion: 'crd.projectcalico.org/v1',
    kind: 'FelixConfiguration',
    metadata: { name: 'default' },
    spec,
  });

  it('keeps the live operator-filled values the bundle leaves unset (a write without them is undone by the operator), not others', () => {
    const live = felix({ bpfEnabled: false, healthPort: 9099, vxlanVNI: 4096, logSeverityScreen: 'Debug' });
    const bundle = felix({ logSeverityScreen: 'Info', healthPort: 9199 });
    expect(keepOperatorFilledFelixFields(bundle, live, 'v3.28.1').spec).toEqual({
      logSeverityScreen: 'Info',
      healthPort: 9199,
      bpfEnabled: false,
      vxlanVNI: 4096,
    });
    expect(keepOperatorFilledFelixFields(felix({ bpfEnabled: false }), live, 'v3.28.1')).toEqual(
      felix({ bpfEnabled: false, healthPort: 9099, vxlanVNI: 4096 }),
    );
    const node = { ...bundle, metadata: { name: 'node.n1' } };
    expect(keepOperatorFilledFelixFields(node, { ...live, metadata: { name: 'node.n1' } }, 'v3.28.1')).toBe(node);
  });

  it("keeps only what the running operator's generation fills: vxlanPort under v1.40 (3.31), not under v1.38 (3.30) (issue 30)", () => {
    const live = felix({ vxlanPort: 4789, vxlanVNI: 4096 });
    expect(keepOperatorFilledFelixFields(felix({}), live, 'v3.31.7').spec).toEqual({ vxlanPort: 4789, vxlanVNI: 4096 });
    expect(keepOperatorFilledFelixFields(felix({}), live, 'v3.30.7').spec).toEqual({ vxlanVNI: 4096 });
  });

  it('keeps the live value of a field the running operator sets from the Installation over any value: a 3.31 bundle under v1.42 (issue 30)', () => {
    // v1.40 wrote Enabled for the nftables dataplane, v1.42 writes Auto: the bundle's value would be rewritten once it resumes (read-back drift).
    expect(keepOperatorFilledFelixFields(felix({ nftablesMode: 'Enabled' }), felix({ nftablesMode: 'Auto' }), 'v3.32.1').spec).toEqual({
      nftablesMode: 'Auto',
    });
    // v1.40 never sets programClusterRoutes: the bundle's value is written.
    expect(keepOperatorFilledFelixFields(felix({ programClusterRoutes: 'Enabled' }), felix({ programClusterRoutes: 'Disabled' }), 'v3.31.7').spec).toEqual({
      programClusterRoutes: 'Enabled',
    });
  });
});
