import { describe, expect, it } from 'vitest';
import { loadRelease } from '../calico/release.js';
import { checkAgainstSchema } from '../calico/schema.js';
import type { KubeObject } from '../kube/types.js';
import { entry, installation328, installationWith, makeState, operatorWorkload, pool, V138_INSTALLATION_FINALIZERS } from '../../test/support/doctor-state.js';
import { changedCrds, computeFindings, deletePath, transformInstallation } from './findings.js';
import { targetPoolsCheck } from './preflight.js';

describe('plan findings 3.28.1 -> 3.27.4 with the real CRDs', async () => {
  const from = await loadRelease('3.28.1');
  const to = await loadRelease('3.27.4');
  const live = (objects: Record<string, KubeObject[]>) => ({ crds: from.crds, objects: new Map(Object.entries(objects)) });

  it('only CRDs whose schema changed are compared; IPPool is identical', () => {
    const names = changedCrds(from.crds, to.crds).map((c) => c.live.metadata.name);
    expect(names).toContain('installations.operator.tigera.io');
    expect(names).toContain('felixconfigurations.crd.projectcalico.org');
    expect(names).not.toContain('ippools.crd.projectcalico.org');
  });

  it('reports the Installation fields 3.27 lacks as a transform, and the transform makes it valid for 3.27', () => {
    const inst = installation328();
    const r = computeFindings(live({ 'installations.operator.tigera.io': [inst] }), to, { version: 'v3.28.1' }, new Set());
    const f = r.findings.find((x) => x.id === 'installation-fields-unknown-to-target')!;
    expect(f.action).toBe('transform');
    expect(f.details.join(' ')).toMatch(/ipPools\[0\]\.name/);
    expect(f.details.join(' ')).toMatch(/ipPools\[0\]\.allowedUses/);
    expect(f.details.join(' ')).toMatch(/linuxPolicySetupTimeoutSeconds/);
    const out = transformInstallation(inst, r.installation);
    const crd = to.crds.find((c) => c.metadata.name === 'installations.operator.tigera.io')!;
    expect(checkAgainstSchema(out, crd)).toEqual([]);
    expect(out.spec.calicoNetwork.ipPools[0]).toMatchObject({ cidr: '192.168.0.0/16', blockSize: 26 });
    expect(inst.spec.calicoNetwork.ipPools[0].name).toBe('default-ipv4-ippool'); // input untouched
  });

  it("drops the v1.34 operator's own defaults without a flag, but settings a user made need --allow-field-loss (with their values)", () => {
    const defaulted = computeFindings(live({ 'installations.operator.tigera.io': [installation328()] }), to, { version: 'v3.28.1' }, new Set());
    expect(defaulted.findings.map((x) => x.id)).not.toContain('installation-fields-lost');
    expect(defaulted.findings.filter((x) => x.severity === 'error')).toEqual([]);

    const inst = installation328([
      { name: 'default-ipv4-ippool', cidr: '192.168.0.0/16', allowedUses: ['Workload', 'Tunnel'] },
      { name: 'pods-b', cidr: '10.9.0.0/16', allowedUses: ['Workload'] },
    ] as any);
    inst.spec.calicoNetwork.linuxPolicySetupTimeoutSeconds = 10;
    inst.spec.calicoNetwork.sysctl = [{ key: 'net.ipv4.tcp_keepalive_time', value: '600' }];
    // The live pool names the first entry (the operator takes a pool's name from the IPPool of its CIDR).
    const livePool: KubeObject = {
      apiVersion: 'crd.projectcalico.org/v1',
      kind: 'IPPool',
      metadata: { name: 'default-ipv4-ippool' },
      spec: { cidr: '192.168.0.0/16' },
    };
    const objs = { 'installations.operator.tigera.io': [inst], 'ippools.crd.projectcalico.org': [livePool] };
    const r = computeFindings(live(objs), to, { version: 'v3.28.1' }, new Set(['trim-installation-pools']));
    const lost = r.findings.find((x) => x.id === 'installation-fields-lost')!;
    expect(lost).toMatchObject({ severity: 'error', action: 'requires-flag', flag: 'allow-field-loss', satisfied: false, objects: ['Installation/default'] });
    // Two entries: "pods-b" is not the name the operator derives (10.9.0.0-16), and ['Workload'] is not its default.
    expect(lost.details.sort()).toEqual([
      'spec.calicoNetwork.ipPools[1].allowedUses: ["Workload"] (unknown to v3.27.4)',
      'spec.calicoNetwork.ipPools[1].name: "pods-b" (unknown to v3.27.4)',
      'spec.calicoNetwork.linuxPolicySetupTimeoutSeconds: 10 (unknown to v3.27.4)',
      'spec.calicoNetwork.sysctl: [{"key":"net.ipv4.tcp_keepalive_time","value":"600"}] (unknown to v3.27.4)',
    ]);
    const ok = computeFindings(
      live({ 'installations.operator.tigera.io': [inst] }),
      to,
      { version: 'v3.28.1' },
      new Set(['trim-installation-pools', 'allow-field-loss']),
    );
    expect(ok.findings.find((x) => x.id === 'installation-fields-lost')).toMatchObject({ severity: 'warning', satisfied: true });
    expect(transformInstallation(inst, ok.installation).spec.calicoNetwork).not.toHaveProperty('sysctl');
  });

  it('clears what only the 3.28 operator clears: its Installation finalizers and TigeraStatus ippools (else delete hangs, Degraded stays)', async () => {
    const inst = installation328();
    inst.metadata.finalizers = ['operator.tigera.io/installation-controller', 'tigera.io/operator-cleanup', 'operator.tigera.io/apiserver-controller'];
    const statuses = ['calico', 'apiserver', 'ippools'].map((name): KubeObject => ({
      apiVersion: 'operator.tigera.io/v1',
      kind: 'TigeraStatus',
      metadata: { name },
    }));
    const objs = { 'installations.operator.tigera.io': [inst], 'tigerastatuses.operator.tigera.io': statuses };
    const r = computeFindings(live(objs), to, { version: 'v3.28.1' }, new Set());
    expect(r.findings.find((x) => x.id === 'newer-operator-leftovers')).toMatchObject({
      action: 'transform',
      objects: ['Installation/default', 'TigeraStatus/ippools'],
    });
    expect(r.installation.removeFinalizers).toEqual(['operator.tigera.io/installation-controller', 'operator.tigera.io/apiserver-controller']);
    expect(r.installation.deleteTigeraStatuses).toEqual(['ippools']);
    // v1.32's own finalizer stays: it is how that operator cleans up on delete.
    expect(transformInstallation(inst, r.installation).metadata.finalizers).toEqual(['tigera.io/operator-cleanup']);
    // Upgrades and downgrades that stay on a 3.28+ operator leave them alone.
    const r29 = computeFindings(live(objs), await loadRelease('3.29.7', { offline: true }), { version: 'v3.28.1' }, new Set());
    expect(r29.findings.map((x) => x.id)).not.toContain('newer-operator-leftovers');
    expect(r29.installation.removeFinalizers).toBeUndefined();
  });

  it('requires a flag for a second IPv4 pool in the Installation, and for FelixConfiguration fields 3.27 prunes', () => {
    const inst = installation328([
      { name: 'a', cidr: '10.0.0.0/16' } as any,
      { name: 'b', cidr: '10.1.0.0/16' } as any,
      { name: 'c', cidr: 'fd00::/48' } as any,
    ]);
    const felix: KubeObject = {
      apiVersion: 'crd.projectcalico.org/v1',
      kind: 'FelixConfiguration',
      metadata: { name: 'default' },
      spec: { debugPort: 6060, logSeverityScreen: 'Info' },
    };
    const objs = { 'installations.operator.tigera.io': [inst], 'felixconfigurations.crd.projectcalico.org': [felix] };
    const r = computeFindings(live(objs), to, { version: 'v3.28.1' }, new Set());
    expect(r.findings.find((x) => x.id === 'installation-too-many-pools')).toMatchObject({ action: 'requires-flag', satisfied: false, severity: 'error' });
    expect(r.findings.find((x) => x.id === 'felixconfiguration-fields-pruned')).toMatchObject({
      action: 'requires-flag',
      flag: 'allow-field-loss',
      satisfied: false,
      objects: ['FelixConfiguration/default'],
    });
    const ok = computeFindings(live(objs), to, { version: 'v3.28.1' }, new Set(['trim-installation-pools', 'allow-field-loss']));
    expect(ok.findings.filter((x) => x.action === 'requires-flag').every((x) => x.satisfied)).toBe(true);
    expect(transformInstallation(inst, ok.installation).spec.calicoNetwork.ipPools.map((p: any) => p.cidr)).toEqual(['10.0.0.0/16', 'fd00::/48']);
  });

  it('keeps CRDs the target lacks (3.30.7 -> 3.28.1)', async () => {
    const r30 = await loadRelease('3.30.7');
    const tier: KubeObject = { apiVersion: 'crd.projectcalico.org/v1', kind: 'Tier', metadata: { name: 'security' }, spec: { order: 100 } };
    const r = computeFindings({ crds: r30.crds, objects: new Map([['tiers.crd.projectcalico.org', [tier]]]) }, from, { version: 'v3.30.7' }, new Set());
    const f = r.findings.find((x) => x.id === 'crd-not-in-target' && x.title.includes('tiers'))!;
    expect(f).toMatchObject({ action: 'keep', severity: 'warning', objects: ['Tier/security'] });
    // the shared policy.networking.k8s.io CRDs are never listed as Calico's to manage
    expect(r.findings.some((x) => x.title.includes('policy.networking.k8s.io'))).toBe(false);
  });

  it('deletePath handles indices and wildcards', () => {
    const o: any = { a: { b: [{ c: 1, d: 2 }, { c: 3 }] } };
    deletePath(o, 'a.b[0].c');
    expect(o).toEqual({ a: { b: [{ d: 2 }, { c: 3 }] } });
    deletePath(o, 'a.b[].c');
    expect(o).toEqual({ a: { b: [{ d: 2 }, {}] } });
  });
});

describe('pools stopped with disableNewAllocations, downgraded below 3.29 (calico#9100 caused by a plan)', async () => {
  const from = await loadRelease('3.30.7');
  const installation330 = (): KubeObject => ({
    apiVersion: 'operator.tigera.io/v1',
    kind: 'Installation',
    metadata: { name: 'default' },
    spec: {
      calicoNetwork: {
        ipPools: [
          {
            name: 'default-ipv4-ippool',
            cidr: '192.168.0.0/16',
            blockSize: 26,
            encapsulation: 'VXLANCrossSubnet',
            natOutgoing: 'Enabled',
            nodeSelector: 'all()',
            disableNewAllocations: true,
            allowedUses: ['Workload', 'Tunnel'],
          },
          {
            name: 'new-pool',
            cidr: '10.10.0.0/16',
            blockSize: 26,
            encapsulation: 'VXLANCrossSubnet',
            natOutgoing: 'Enabled',
            nodeSelector: 'all()',
            disableNewAllocations: false,
          },
        ],
      },
    },
  });
  const live = (inst: KubeObject) => ({ crds: from.crds, objects: new Map(Object.entries({ 'installations.operator.tigera.io': [inst] })) });

  it('3.30.7 -> 3.28.1: the stopped entry gets nodeSelector "!all()" (the field is pruned by the 3.28 CRD), the other is untouched', async () => {
    const to = await loadRelease('3.28.1');
    const inst = installation330();
    const r = computeFindings(live(inst), to, { version: 'v3.30.7' }, new Set());
    const f = r.findings.find((x) => x.id === 'installation-pool-stop-allocations-converted')!;
    expect(f.action).toBe('transform');
    expect(f.details.join(' ')).toMatch(/default-ipv4-ippool: disableNewAllocations: true -> nodeSelector: "!all\(\)" \(was nodeSelector: "all\(\)"\)/);
    const out = transformInstallation(inst, r.installation);
    const crd = to.crds.find((c) => c.metadata.name === 'installations.operator.tigera.io')!;
    expect(checkAgainstSchema(out, crd)).toEqual([]);
    expect(out.spec.calicoNetwork.ipPools.map((p: any) => [p.cidr, p.nodeSelector, p.disableNewAllocations])).toEqual([
      ['192.168.0.0/16', '!all()', undefined],
      ['10.10.0.0/16', 'all()', undefined],
    ]);
    // The management finding tells the truth about a 3.28 target: its operator does write pools.
    const m = r.findings.find((x) => x.id === 'operator-pool-management-changes')!;
    expect(m.details.join(' ')).toMatch(/keeps reconciling IPPools/);
    expect(m.details.join(' ')).not.toMatch(/does not write IPPools/);
  });

  it('3.30.7 -> 3.28.1: a stopped pool the operator does not own (no label) has its entry removed, not stopped (else v1.34 refuses it every reconcile)', async () => {
    const to = await loadRelease('3.28.1');
    const labelled = { 'app.kubernetes.io/managed-by': 'tigera-operator' };
    for (const [labels, expected] of [
      [labelled, { stop: ['192.168.0.0/16'], unlist: undefined }],
      [undefined, { stop: undefined, unlist: ['192.168.0.0/16'] }],
    ] as const) {
      const pools = [pool('default-ipv4-ippool', '192.168.0.0/16', { disabled: true }, labels), pool('new-pool', '10.10.0.0/16', {}, labelled)];
      const objs = {
        crds: from.crds,
        objects: new Map(Object.entries({ 'installations.operator.tigera.io': [installation330()], 'ippools.crd.projectcalico.org': pools })),
      };
      const r = computeFindings(objs, to, { version: 'v3.30.7' }, new Set());
      expect(r.installation.stopAllocations?.cidrs, JSON.stringify(labels)).toEqual(expected.stop);
      expect(r.installation.unlistPools?.cidrs, JSON.stringify(labels)).toEqual(expected.unlist);
      const out = transformInstallation(installation330(), r.installation);
      expect(out.spec.calicoNetwork.ipPools.map((p: any) => p.cidr)).toEqual(labels ? ['192.168.0.0/16', '10.10.0.0/16'] : ['10.10.0.0/16']);
      if (!labels) {
        expect(r.findings.find((x) => x.id === 'installation-pool-stop-allocations-converted')!.details.join(' ')).toMatch(
          /no operator label; its entry is removed/,
        );
        // The preflight that blocks apply accepts it: the operator does not own the pool, so it will not delete it.
        const state = makeState({ objects: [installation330(), ...pools], workloads: [operatorWorkload('v1.38.13')] });
        expect(targetPoolsCheck(state, to, r.installation).ok).toBe(true);
      }
    }
  });

  it('3.30.7 -> 3.29.7 keeps disableNewAllocations; 3.30.7 -> 3.27.4 needs no conversion (that operator does not manage pools)', async () => {
    for (const v of ['3.29.7', '3.27.4']) {
      const r = computeFindings(live(installation330()), await loadRelease(v), { version: 'v3.30.7' }, new Set());
      expect(
        r.findings.some((x) => x.id === 'installation-pool-stop-allocations-converted'),
        v,
      ).toBe(false);
      expect(r.installation.stopAllocations, v).toBeUndefined();
    }
    const r27 = computeFindings(live(installation330()), await loadRelease('3.27.4'), { version: 'v3.30.7' }, new Set());
    expect(r27.findings.find((x) => x.id === 'operator-pool-management-changes')!.details.join(' ')).toMatch(/does not write IPPools/);
  });
});

describe('plan findings for the calico#9100 incident: 3.27.4 with the disabled default pool still listed', async () => {
  const [v327, v328, v329] = await Promise.all(['3.27.4', '3.28.1', '3.29.7'].map((v) => loadRelease(v, { offline: true })));
  const MANAGED = { 'app.kubernetes.io/managed-by': 'tigera-operator' };
  const objects = (labels?: Record<string, string>) => [
    pool('default-ipv4-ippool', '192.168.0.0/16', { disabled: true, allowedUses: ['Workload', 'Tunnel'] }, labels),
    pool('new-pool', '10.10.0.0/16'),
    installationWith([entry('default-ipv4-ippool', '192.168.0.0/16')]),
  ];
  const live = (objs: KubeObject[]) => ({
    crds: v327.crds,
    objects: new Map([
      ['ippools.crd.projectcalico.org', objs.filter((o) => o.kind === 'IPPool')],
      ['installations.operator.tigera.io', objs.filter((o) => o.kind === 'Installation')],
    ]),
  });
  const state = (objs: KubeObject[]) => makeState({ objects: objs, workloads: [operatorWorkload('v1.32.10')] });

  it('to 3.28.1: an unlabelled pool has its entry removed (v1.34.3 leaves it disabled), which the blocking pool preflight then accepts', () => {
    const r = computeFindings(live(objects()), v328, { version: 'v3.27.4' }, new Set());
    const f = r.findings.find((x) => x.id === 'installation-disabled-pool-stop-allocations');
    expect(f).toMatchObject({ action: 'transform', severity: 'warning', objects: ['IPPool/default-ipv4-ippool', 'Installation/default'] });
    expect(f!.plan).toMatch(/remove the entries of default-ipv4-ippool/);
    // Stopped with nodeSelector "!all()", the entry would no longer equal the unlabelled pool: v1.34.3 would refuse
    // it on every reconcile ("Cannot update an IP pool not owned by the operator") and never apply the entry.
    expect(r.installation.stopAllocations).toBeUndefined();
    expect(r.installation.unlistPools).toEqual({ cidrs: ['192.168.0.0/16'] });
    expect(targetPoolsCheck(state(objects()), v328, { removeFields: [], trimPoolsPerFamily: false }).ok).toBe(false);
    expect(targetPoolsCheck(state(objects()), v328, r.installation).ok).toBe(true);
    // Only that entry goes; the other entries stay as they were.
    const inst = installationWith([entry('default-ipv4-ippool', '192.168.0.0/16'), entry('new-pool', '10.10.0.0/16')]);
    expect(transformInstallation(inst, r.installation).spec.calicoNetwork.ipPools.map((e: any) => e.cidr)).toEqual(['10.10.0.0/16']);
  });

  it('to 3.28.1: a labelled pool is stopped on its entry with nodeSelector "!all()" (the operator owns it and rewrites it stopped)', () => {
    const r = computeFindings(live(objects(MANAGED)), v328, { version: 'v3.27.4' }, new Set());
    expect(r.installation.stopAllocations).toEqual({ cidrs: ['192.168.0.0/16'], field: 'nodeSelector', value: '!all()' });
    expect(r.installation.unlistPools).toBeUndefined();
    expect(targetPoolsCheck(state(objects(MANAGED)), v328, r.installation).ok).toBe(true);
    const inst = objects(MANAGED).find((o) => o.kind === 'Installation')!;
    expect(transformInstallation(inst, r.installation).spec.calicoNetwork.ipPools[0].nodeSelector).toBe('!all()');
  });

  it('to 3.29.7: an unlabelled disabled pool needs nothing (that operator does not adopt it); a labelled one gets disableNewAllocations', () => {
    const plain = computeFindings(live(objects()), v329, { version: 'v3.27.4' }, new Set());
    expect(plain.findings.map((x) => x.id)).not.toContain('installation-disabled-pool-stop-allocations');
    expect(plain.installation.stopAllocations).toBeUndefined();
    const labelled = computeFindings(live(objects(MANAGED)), v329, { version: 'v3.27.4' }, new Set());
    expect(labelled.installation.stopAllocations).toEqual({ cidrs: ['192.168.0.0/16'], field: 'disableNewAllocations', value: true });
    expect(targetPoolsCheck(state(objects(MANAGED)), v329, labelled.installation).ok).toBe(true);
    expect(targetPoolsCheck(state(objects(MANAGED)), v329, { removeFields: [], trimPoolsPerFamily: false }).ok).toBe(false);
  });

  it('to 3.27.5 (an operator that never writes pools): no conversion', async () => {
    const r = computeFindings(live(objects()), await loadRelease('3.27.5', { offline: true }), { version: 'v3.27.4' }, new Set());
    expect(r.installation.stopAllocations).toBeUndefined();
  });
});

describe('the 3.30+ operators leave finalizers and TigeraStatus objects an older operator never clears (issue 30)', async () => {
  const from = await loadRelease('3.30.7', { offline: true });
  // What the v1.38.13 operator leaves on a default 3.30 install (custom-resources.yaml creates Whisker and Goldmane).
  const inst = (): KubeObject => ({
    ...installation328(),
    metadata: {
      name: 'default',
      finalizers: [...V138_INSTALLATION_FINALIZERS],
    },
  });
  const statuses = ['calico', 'apiserver', 'ippools', 'whisker', 'goldmane'].map((name): KubeObject => ({
    apiVersion: 'operator.tigera.io/v1',
    kind: 'TigeraStatus',
    metadata: { name },
  }));
  const live = () => ({
    crds: from.crds,
    objects: new Map(Object.entries({ 'installations.operator.tigera.io': [inst()], 'tigerastatuses.operator.tigera.io': statuses })),
  });

  it('3.30.7 -> 3.29.7 removes the whisker and goldmane finalizers and TigeraStatus objects (else delete installation hangs)', async () => {
    const r = computeFindings(live(), await loadRelease('3.29.7', { offline: true }), { version: 'v3.30.7' }, new Set());
    expect(r.installation.removeFinalizers).toEqual(['operator.tigera.io/whisker-controller', 'operator.tigera.io/goldmane-controller']);
    expect(r.installation.deleteTigeraStatuses).toEqual(['whisker', 'goldmane']);
    expect(transformInstallation(inst(), r.installation).metadata.finalizers).toEqual([
      'tigera.io/operator-cleanup',
      'operator.tigera.io/installation-controller',
      'operator.tigera.io/apiserver-controller',
    ]);
  });

  it("3.30.7 -> 3.27.4 removes every finalizer but v1.32's own; 3.30.7 -> 3.31.7 removes none", async () => {
    const r = computeFindings(live(), await loadRelease('3.27.4', { offline: true }), { version: 'v3.30.7' }, new Set());
    expect(transformInstallation(inst(), r.installation).metadata.finalizers).toEqual(['tigera.io/operator-cleanup']);
    expect(r.installation.deleteTigeraStatuses).toEqual(['ippools', 'whisker', 'goldmane']);
    const up = computeFindings(live(), await loadRelease('3.31.7', { offline: true }), { version: 'v3.30.7' }, new Set());
    expect(up.installation.removeFinalizers).toBeUndefined();
    expect(up.findings.map((x) => x.id)).not.toContain('newer-operator-leftovers');
  });

  it("3.32.1 -> 3.31.7: an operator finalizer no generation lists goes too, and v1.42's finalizer on an Istio object", async () => {
    const future = {
      ...inst(),
      metadata: { name: 'default', finalizers: [...V138_INSTALLATION_FINALIZERS, 'operator.tigera.io/future-controller', 'example.com/hold'] },
    };
    const istio: KubeObject = {
      apiVersion: 'operator.tigera.io/v1',
      kind: 'Istio',
      metadata: { name: 'default', finalizers: ['operator.tigera.io/calico-istio'] },
    };
    const objs = { 'installations.operator.tigera.io': [future], 'istios.operator.tigera.io': [istio], 'tigerastatuses.operator.tigera.io': statuses };
    const r = computeFindings(
      { crds: from.crds, objects: new Map(Object.entries(objs)) },
      await loadRelease('3.31.7', { offline: true }),
      { version: 'v3.32.1' },
      new Set(),
    );
    // Another tool's finalizer is never the operator's to clear.
    expect(r.installation.removeFinalizers).toEqual(['operator.tigera.io/future-controller']);
    expect(r.installation.removeCustomResourceFinalizers).toEqual([
      { crd: 'istios.operator.tigera.io', name: 'default', finalizer: 'operator.tigera.io/calico-istio' },
    ]);
    expect(r.findings.find((x) => x.id === 'newer-operator-leftovers')).toMatchObject({
      objects: ['Installation/default', 'istios/default'],
      plan: expect.stringContaining('remove-operator-leftovers'),
    });
  });
});

describe('3.31 <-> 3.32 with the real CRDs: what the releases write by themselves is dropped without a flag (issue 30)', async () => {
  const [r331, r332] = await Promise.all(['3.31.7', '3.32.1'].map((v) => loadRelease(v, { offline: true })));
  const lostOrPruned = (r: ReturnType<typeof computeFindings>) =>
    r.findings.filter((f) => f.severity === 'error').map((f) => `${f.id}: ${f.details?.join('; ')}`);

  it("3.31.7 -> 3.32.1: v1.40's cni.specVersion Auto (its default; v1.42's CRD has no such field) needs no --allow-field-loss; 0.3.1 does", () => {
    const with331 = (specVersion: string) => ({
      ...installation328(),
      spec: { ...installation328().spec, cni: { type: 'Calico', ipam: { type: 'Calico' }, specVersion } },
    });
    const auto = computeFindings(
      { crds: r331.crds, objects: new Map([['installations.operator.tigera.io', [with331('Auto')]]]) },
      r332,
      { version: 'v3.31.7' },
      new Set(),
    );
    expect(lostOrPruned(auto)).toEqual([]);
    expect(auto.installation.removeFields).toContain('spec.cni.specVersion');
    const set = computeFindings(
      { crds: r331.crds, objects: new Map([['installations.operator.tigera.io', [with331('0.3.1')]]]) },
      r332,
      { version: 'v3.31.7' },
      new Set(),
    );
    expect(lostOrPruned(set)).toEqual(['installation-fields-lost: spec.cni.specVersion: "0.3.1" (unknown to v3.32.1)']);
  });

  it("3.32.1 -> 3.31.7: IPAM's own affinityClaimTime and the IPAMConfig default IPAM creates need no flag; another persistence value does", () => {
    const block: KubeObject = {
      apiVersion: 'crd.projectcalico.org/v1',
      kind: 'IPAMBlock',
      metadata: { name: '192-168-39-128-26' },
      spec: {
        cidr: '192.168.39.128/26',
        affinity: 'host:n1',
        affinityClaimTime: '2026-12-06T13:30:01Z',
        allocations: [],
        unallocated: [],
        attributes: [],
        strictAffinity: false,
      },
    };
    const config = (persistence: string): KubeObject => ({
      apiVersion: 'crd.projectcalico.org/v1',
      kind: 'IPAMConfig',
      metadata: { name: 'default' },
      spec: { autoAllocateBlocks: true, strictAffinity: false, kubeVirtVMAddressPersistence: persistence },
    });
    const objects = (persistence: string) =>
      new Map([
        ['ipamblocks.crd.projectcalico.org', [block]],
        ['ipamconfigs.crd.projectcalico.org', [config(persistence)]],
      ]);
    expect(lostOrPruned(computeFindings({ crds: r332.crds, objects: objects('Enabled') }, r331, { version: 'v3.32.1' }, new Set()))).toEqual([]);
    const disabled = lostOrPruned(computeFindings({ crds: r332.crds, objects: objects('Disabled') }, r331, { version: 'v3.32.1' }, new Set()));
    expect(disabled).toHaveLength(1);
    expect(disabled[0]).toMatch(/^ipamconfig-fields-pruned: spec\.kubeVirtVMAddressPersistence/);
  });
});
