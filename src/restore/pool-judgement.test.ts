import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../kube/types.js';
import { calicoVersionOfOperatorImage, judgePool, stopEntriesOfStoppedPools } from './pools.js';

const op = (tag: string) => `quay.io/tigera/operator:${tag}`;
const CIDR = '192.168.0.0/16';
/** What the operator makes of an entry that names only its CIDR (ippool/defaults.go): IPIP, NAT, /26, all(), both uses. */
const DEFAULTED = { ipipMode: 'Always', vxlanMode: 'Never', natOutgoing: true, blockSize: 26, nodeSelector: 'all()', allowedUses: ['Workload', 'Tunnel'] };
const pool = (name: string, spec: Record<string, unknown>, managed = false): KubeObject => ({
  apiVersion: 'crd.projectcalico.org/v1',
  kind: 'IPPool',
  metadata: {
    name,
    ...(managed ? { annotations: { 'projectcalico.org/metadata': JSON.stringify({ labels: { 'app.kubernetes.io/managed-by': 'tigera-operator' } }) } } : {}),
  },
  spec: { cidr: CIDR, ...spec },
});
const installationWith = (extra: Record<string, unknown> = {}): KubeObject => ({
  apiVersion: 'operator.tigera.io/v1',
  kind: 'Installation',
  metadata: { name: 'default' },
  spec: { calicoNetwork: { ipPools: [{ name: 'default-ipv4-ippool', cidr: CIDR, ...extra }] } },
});
const installation = installationWith();
const entryOf = (inst: KubeObject) => inst.spec.calicoNetwork.ipPools[0];

describe('operator-managed IP pools', () => {
  it('maps operator images to Calico versions', () => {
    expect(calicoVersionOfOperatorImage(op('v1.34.3'))).toBe('v3.28.1');
    expect(calicoVersionOfOperatorImage(op('v1.36.99'))).toBe('v3.29.0');
    expect(calicoVersionOfOperatorImage('quay.io/tigera/operator')).toBeUndefined();
  });

  it('restores a pool the operator adopts (equal to its entry) through that entry under v1.34, and says so', () => {
    const v = judgePool(pool('default-ipv4-ippool', DEFAULTED), installation, op('v1.34.3'));
    expect(v).toMatchObject({ managed: true, entry: 'default-ipv4-ippool' });
    expect(v.refusal).toBeUndefined();
    expect(v.note).toMatch(/through Installation entry default-ipv4-ippool/);
  });

  it('refuses a disabled pool the operator owns under v1.34 (no disabled field), with the nodeSelector fix; v1.36 suggests disableNewAllocations', () => {
    // Adopted by equality: v1.34's pool type has no disabled, so the disabled pool still equals its entry.
    const adopted = pool('default-ipv4-ippool', { ...DEFAULTED, disabled: true });
    const v134 = judgePool(adopted, installation, op('v1.34.3'));
    expect(v134.refusal?.reason).toMatch(/has no "disabled" field/);
    expect(v134.refusal?.fix).toMatch(/nodeSelector: "!all\(\)"/);
    const labelled = pool('default-ipv4-ippool', { ...DEFAULTED, disabled: true }, true);
    expect(judgePool(labelled, installation, op('v1.36.16')).refusal?.fix).toMatch(/disableNewAllocations: true/);
  });

  it("does not refuse a disabled pool whose entry already stops it the operator's way (a refusal there would loop)", () => {
    const disabled = pool('default-ipv4-ippool', { ...DEFAULTED, disabled: true });
    const v136 = judgePool(disabled, installationWith({ disableNewAllocations: true }), op('v1.36.16'));
    expect(v136).toMatchObject({ managed: true, entry: 'default-ipv4-ippool' });
    expect(v136.refusal).toBeUndefined();
    const labelled = pool('default-ipv4-ippool', { ...DEFAULTED, disabled: true }, true);
    expect(judgePool(labelled, installationWith({ nodeSelector: '!all()' }), op('v1.34.3')).refusal).toBeUndefined();
    // The 3.29 field means nothing to operator v1.34: still refused there.
    expect(judgePool(labelled, installationWith({ disableNewAllocations: true }), op('v1.34.3')).refusal).toBeDefined();
  });

  it('writes a disabled pool the operator does not own as it is: it differs from its entry, so the operator leaves it alone (issue 30)', () => {
    // NAT off: unequal to the entry's defaulted natOutgoing Enabled, so pool_controller.go never takes it.
    const mine = pool('default-ipv4-ippool', { ...DEFAULTED, natOutgoing: false, disabled: true });
    const v134 = judgePool(mine, installation, op('v1.34.3'));
    expect(v134.refusal).toBeUndefined();
    expect(v134.managed).toBe(false);
    expect(v134.note).toMatch(
      /not tigera operator v1\.34\.3's.*differs from Installation entry default-ipv4-ippool \(natOutgoing\).*Cannot update an IP pool not owned/,
    );
    // 3.29+: disabled alone makes it unequal (disableNewAllocations true against the entry's false).
    const v136 = judgePool(pool('default-ipv4-ippool', { ...DEFAULTED, disabled: true }), installation, op('v1.36.16'));
    expect(v136).toMatchObject({ managed: false });
    expect(v136.note).toMatch(/\(disableNewAllocations\)/);
  });

  it('leaves pools alone when the operator does not manage them (v1.32, no operator, not listed or labelled)', () => {
    const disabled = pool('default-ipv4-ippool', { ...DEFAULTED, disabled: true });
    expect(judgePool(disabled, installation, op('v1.32.10'))).toEqual({ managed: false });
    expect(judgePool(disabled, installation, undefined)).toEqual({ managed: false });
    const other = { ...pool('mine', { disabled: true }), spec: { cidr: '10.9.0.0/16', disabled: true } };
    expect(judgePool(other, installation, op('v1.34.3'))).toEqual({ managed: false });
    const labelled = { ...pool('mine', {}, true), spec: { cidr: '10.9.0.0/16', disabled: true } };
    expect(judgePool(labelled, installation, op('v1.34.3')).refusal).toBeDefined();
  });

  it('reads the managed-by label where the operator does: the projectcalico.org/metadata annotation wins over metadata.labels', () => {
    const relabelled = { ...pool('mine', {}), spec: { cidr: '10.9.0.0/16', disabled: true } };
    relabelled.metadata.labels = { 'app.kubernetes.io/managed-by': 'tigera-operator' };
    relabelled.metadata.annotations = { 'projectcalico.org/metadata': JSON.stringify({ labels: {} }) };
    expect(judgePool(relabelled, installation, op('v1.34.3'))).toEqual({ managed: false });
  });
});

describe("a disabled pool the operator does not own gets its Installation entry stopped the operator's way (issue 30)", () => {
  const mine = pool('default-ipv4-ippool', { ...DEFAULTED, natOutgoing: false, disabled: true });

  it('v1.34: nodeSelector "!all()" on the entry of the same CIDR, said in a note; the bundle object is not changed', () => {
    const before = JSON.stringify(installation);
    const { installation: out, notes } = stopEntriesOfStoppedPools(installation, [mine], op('v1.34.3'));
    expect(entryOf(out)).toEqual({ name: 'default-ipv4-ippool', cidr: CIDR, nodeSelector: '!all()' });
    expect(notes).toEqual([expect.stringMatching(/^entry default-ipv4-ippool .* nodeSelector: "!all\(\)": pool default-ipv4-ippool is disabled .*#9100/)]);
    expect(JSON.stringify(installation)).toBe(before);
  });

  it('v1.36+: disableNewAllocations: true, which makes the operator adopt a pool that differed only in being disabled', () => {
    const disabled = pool('default-ipv4-ippool', { ...DEFAULTED, disabled: true });
    const { installation: out } = stopEntriesOfStoppedPools(installation, [disabled], op('v1.36.16'));
    expect(entryOf(out).disableNewAllocations).toBe(true);
    expect(judgePool(disabled, out, op('v1.36.16'))).toMatchObject({ managed: true, entry: 'default-ipv4-ippool' });
    expect(judgePool(disabled, out, op('v1.36.16')).refusal).toBeUndefined();
  });

  it('leaves the Installation as it is for enabled or unlisted pools, entries stopped already, and operators that do not manage pools', () => {
    const same = (inst: KubeObject, pools: KubeObject[], image?: string) =>
      expect(stopEntriesOfStoppedPools(inst, pools, image)).toEqual({ installation: inst, notes: [] });
    same(installation, [pool('default-ipv4-ippool', DEFAULTED)], op('v1.34.3'));
    same(installation, [{ ...mine, spec: { ...mine.spec, cidr: '10.9.0.0/16' } }], op('v1.34.3'));
    same(installationWith({ nodeSelector: '!all()' }), [mine], op('v1.34.3'));
    same(installation, [mine], op('v1.32.10'));
    same(installation, [mine], undefined);
  });
});

describe("a disabled pool the operator owns: its entry stopped the operator's way, not refused (issue 30)", () => {
  const owned = pool('default-ipv4-ippool', { ...DEFAULTED, disabled: true }, true);
  /** What restore plans: the Installation with its entries stopped (plan.ts), the pool judged against that. */
  const planned = (inst: KubeObject | undefined, image: string) => {
    const stopped = inst && stopEntriesOfStoppedPools(inst, [owned], image);
    return { stopped, verdict: judgePool(owned, stopped?.installation, image) };
  };

  it('v1.34: the entry gets nodeSelector "!all()", the pool is restored through it, and both notes name the field', () => {
    const { stopped, verdict } = planned(installation, op('v1.34.3'));
    expect(entryOf(stopped!.installation)).toEqual({ name: 'default-ipv4-ippool', cidr: CIDR, nodeSelector: '!all()' });
    expect(stopped!.notes).toEqual([
      expect.stringMatching(
        /^entry default-ipv4-ippool .* nodeSelector: "!all\(\)": pool default-ipv4-ippool is disabled in the bundle and tigera operator v1\.34\.3's .*#9100/,
      ),
    ]);
    expect(verdict.refusal).toBeUndefined();
    expect(verdict).toMatchObject({ managed: true, entry: 'default-ipv4-ippool' });
    // The 3.28 operator's rewrite is said, with what a selector that selects no node still lets through.
    expect(verdict.note).toMatch(/written with nodeSelector: "!all\(\)".*rewrites the pool .* without disabled.*ipv4pools annotation/);
  });

  it('v1.36+: the entry gets disableNewAllocations: true, which the operator writes into the pool as disabled: true', () => {
    for (const tag of ['v1.36.16', 'v1.38.13']) {
      const { stopped, verdict } = planned(installation, op(tag));
      expect(entryOf(stopped!.installation).disableNewAllocations, tag).toBe(true);
      expect(stopped!.notes[0], tag).toMatch(
        /disableNewAllocations: true: pool default-ipv4-ippool is disabled in the bundle and tigera operator v1\.3[68]\.\d+'s/,
      );
      expect(verdict.refusal, tag).toBeUndefined();
      expect(verdict.note, tag).toMatch(/written with disableNewAllocations: true.*writes the pool from that entry with disabled: true/);
    }
  });

  it('is still refused where restore cannot stop its entry: no Installation in the bundle, or no entry of its CIDR', () => {
    expect(planned(undefined, op('v1.34.3')).verdict.refusal?.reason).toMatch(/has no "disabled" field/);
    // An entry of the same name but another CIDR: the operator matches pools by CIDR, restore stops none.
    const elsewhere = installationWith({ cidr: '10.9.0.0/16' });
    const { stopped, verdict } = planned(elsewhere, op('v1.34.3'));
    expect(stopped!.notes).toEqual([]);
    expect(verdict.refusal?.fix).toMatch(/nodeSelector: "!all\(\)" on the pool's entry \(cidr 192\.168\.0\.0\/16\)/);
  });
});
