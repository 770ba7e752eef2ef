import { describe, expect, it } from 'vitest';
import { loadRelease } from '../calico/release.js';
import { fixtureCrd } from '../../test/support/doctor-fixtures.js';
import { doctorExitCode, doctorReport, runChecks } from './doctor.js';
import { addressAt, canonicalIp, cidrContains, parseCidr, parseIp } from './ip.js';
import { affinity, block, calicoNode, entry, handle, installationWith, makeState, operatorWorkload, pool, podAt } from '../../test/support/doctor-state.js';

const MANAGED = { 'app.kubernetes.io/managed-by': 'tigera-operator' };
const ids = (fs: { id: string }[]) => fs.map((f) => f.id);

describe('ip helpers', () => {
  it('parses v4 and v6, tests membership, walks block ordinals', () => {
    const c = parseCidr('10.244.1.0/26')!;
    expect(addressAt(c, 5)).toBe('10.244.1.5');
    expect(cidrContains(c, parseIp('10.244.1.63')!)).toBe(true);
    expect(cidrContains(c, parseIp('10.244.1.64')!)).toBe(false);
    const v6 = parseCidr('fd00:10:244::/122')!;
    expect(addressAt(v6, 17)).toBe('fd00:10:244::11');
    expect(cidrContains(v6, parseIp('fd00:10:244:0::3f')!)).toBe(true);
    expect(cidrContains(v6, parseIp('10.244.1.1')!)).toBe(false);
    expect(canonicalIp('fd00:0:0:0:0:0:0:0001')).toBe('fd00::1');
    expect(parseCidr('nonsense')).toBeUndefined();
  });
});

describe('pools under the tigera operator', () => {
  const incident = (opTag: string, poolLabels?: Record<string, string>) =>
    makeState({
      workloads: [operatorWorkload(opTag)],
      objects: [
        installationWith([entry('default-ipv4-ippool', '192.168.0.0/16')]),
        pool('default-ipv4-ippool', '192.168.0.0/16', { disabled: true, allowedUses: ['Workload', 'Tunnel'] }, poolLabels),
      ],
    });

  it('reports the #9100 incident on 3.28 (pool equal to the Installation entry, disabled): unlabelled, the fix unlists it', () => {
    const fs = runChecks(incident('v1.34.3'));
    const f = fs.find((x) => x.id === 'pool-disabled-will-be-reenabled');
    expect(f, JSON.stringify(fs)).toBeDefined();
    expect(f!.severity).toBe('error');
    expect(f!.objects).toEqual(['IPPool/default-ipv4-ippool', 'Installation/default']);
    expect(f!.why).toMatch(/equals entry 0/);
    expect(f!.why).toMatch(/#9100/);
    // nodeSelector "!all()" on the entry would leave an entry the unlabelled pool no longer equals: v1.34.3 then
    // refuses the pool on every reconcile ("Cannot update an IP pool not owned by the operator").
    expect(f!.fix).not.toContain('!all()');
    expect(f!.fix).toContain('remove entry 0 (cidr 192.168.0.0/16)');
    expect(f!.fix).toContain(
      '{"op":"test","path":"/spec/calicoNetwork/ipPools/0/cidr","value":"192.168.0.0/16"},{"op":"remove","path":"/spec/calicoNetwork/ipPools/0"}',
    );
  });

  it('on 3.28 a pool with the operator label keeps the nodeSelector fix (the operator owns it and rewrites it stopped)', () => {
    const f = runChecks(incident('v1.34.3', MANAGED)).find((x) => x.id === 'pool-disabled-will-be-reenabled')!;
    expect(f.fix).toContain('nodeSelector: "!all()"');
    expect(f.fix).toContain('"path":"/spec/calicoNetwork/ipPools/0/nodeSelector","value":"!all()"');
  });

  it('explains adoption by label, and gives disableNewAllocations from 3.29 on', () => {
    const f = runChecks(incident('v1.38.13', MANAGED)).find((x) => x.id === 'pool-disabled-will-be-reenabled')!;
    expect(f.why).toMatch(/carries the label app.kubernetes.io\/managed-by=tigera-operator/);
    expect(f.fix).toContain('disableNewAllocations: true');
  });

  it('from 3.29 the operator compares disabled as disableNewAllocations: an unlabelled disabled pool is not adopted, so not reported', () => {
    // v1.36+ FromProjectCalicoV1 turns disabled into disableNewAllocations: true and defaults the entry to false,
    // so the disabled pool no longer equals its entry (verified with operator v1.36.13, docs/calico-programs.md).
    expect(ids(runChecks(incident('v1.38.13')))).not.toContain('pool-disabled-will-be-reenabled');
    expect(ids(runChecks(incident('v1.38.13')))).toContain('pool-cidr-not-owned');
    // 3.28 has no such field: the same pool is adopted and re-enabled.
    expect(ids(runChecks(incident('v1.34.3')))).toContain('pool-disabled-will-be-reenabled');
  });

  it('is quiet under operator v1.32 (3.27 never writes pools) but warns for --target 3.28', async () => {
    const st = incident('v1.32.10');
    expect(ids(runChecks(st))).not.toContain('pool-disabled-will-be-reenabled');
    const target = await loadRelease('3.28.1', { offline: true });
    const f = runChecks(st, { target }).find((x) => x.id === 'pool-disabled-will-be-reenabled');
    expect(f?.title).toMatch(/target Calico v3.28.1/);
  });

  it('leaves alone a disabled pool the operator does not adopt (different settings, no label)', () => {
    const st = makeState({
      workloads: [operatorWorkload('v1.34.3')],
      objects: [installationWith([entry('default-ipv4-ippool', '192.168.0.0/16')]), pool('other', '10.10.0.0/16', { disabled: true })],
    });
    expect(runChecks(st)).toEqual([]);
  });

  it('takes the managed-by label from the projectcalico.org/metadata annotation, as the operator does', () => {
    const v3 = (labels: Record<string, string>, crdLabels?: Record<string, string>) => {
      const p = pool('old', '10.50.0.0/16', {}, crdLabels);
      p.metadata.annotations = { 'projectcalico.org/metadata': JSON.stringify({ labels }) };
      return p;
    };
    const st = (p: ReturnType<typeof pool>) =>
      makeState({ workloads: [operatorWorkload('v1.34.3')], objects: [installationWith([entry('default-ipv4-ippool', '192.168.0.0/16')]), p] });
    expect(ids(runChecks(st(v3(MANAGED))))).toContain('pool-managed-not-listed');
    // metadata.labels say managed, the v3 metadata says not: the operator leaves it alone.
    expect(ids(runChecks(st(v3({}, MANAGED))))).not.toContain('pool-managed-not-listed');
  });

  it('reports a labelled pool missing from the Installation, and ipPools: [] with adopted pools', () => {
    const st = makeState({
      workloads: [operatorWorkload('v1.34.3')],
      objects: [
        installationWith([entry('default-ipv4-ippool', '192.168.0.0/16')]),
        pool('default-ipv4-ippool', '192.168.0.0/16', { allowedUses: ['Workload', 'Tunnel'] }, MANAGED),
        pool('old', '10.50.0.0/16', {}, MANAGED),
      ],
    });
    const f = runChecks(st).find((x) => x.id === 'pool-managed-not-listed')!;
    expect(f.objects).toEqual(['IPPool/old', 'Installation/default']);
    // The fix goes through the v3 API: the operator reads the label from the projectcalico.org/metadata annotation.
    expect(f.fix).toContain('kubectl label ippools.projectcalico.org old app.kubernetes.io/managed-by-');
    expect(f.fix).toContain('calicoctl label ippool old app.kubernetes.io/managed-by --remove');
    expect(f.fix).not.toContain('ippools.crd.projectcalico.org');
    const empty = makeState({ workloads: [operatorWorkload('v1.34.3')], objects: [installationWith([]), pool('a', '10.50.0.0/16', {}, MANAGED)] });
    expect(ids(runChecks(empty))).toEqual(['installation-ippools-empty']);
  });

  it('3.27 operator: more than one pool per IP family in the Installation', () => {
    const st = makeState({
      workloads: [operatorWorkload('v1.32.10')],
      objects: [installationWith([{ cidr: '10.1.0.0/16' }, { cidr: '10.2.0.0/16' }, { cidr: 'fd00::/48' }])],
    });
    const fs = runChecks(st);
    expect(ids(fs)).toEqual(['installation-pools-per-family']);
    expect(fs[0]!.title).toMatch(/2 IPv4 pools/);
  });
});

describe('IPAM consistency', () => {
  const base = (extra: Parameters<typeof makeState>[0]) => makeState({ ...extra, objects: [pool('p', '10.244.0.0/16'), ...(extra?.objects ?? [])] });

  it('a consistent population gives no findings', () => {
    const st = base({
      objects: [
        block('10.244.0.0/26', 'n1', [
          { ordinal: 1, handle: 'k8s-pod-network.aaa', pod: ['default', 'web-1'] },
          { ordinal: 0, handle: 'vxlan-tunnel-addr-n1' },
        ]),
        handle('k8s-pod-network.aaa', '10.244.0.0/26'),
        handle('vxlan-tunnel-addr-n1', '10.244.0.0/26'),
        affinity('n1', '10.244.0.0/26'),
      ],
      pods: [podAt('default', 'web-1', 'n1', '10.244.0.1'), podAt('kube-system', 'host', 'n1', '127.0.0.1', { hostNetwork: true })],
    });
    // The tunnel address is in use because the node says so (projectcalico.org/IPv4VXLANTunnelAddr).
    st.nodes = [
      { name: 'n1', ready: true, tunnelIPs: ['10.244.0.0'] },
      { name: 'n2', ready: true },
    ];
    const r = doctorReport(st);
    expect(r.findings).toEqual([]);
    expect(doctorExitCode(r)).toBe(0);
  });

  it('blocks, affinities and tunnel handles of a deleted node', () => {
    const st = base({
      objects: [
        block('10.244.0.64/26', 'gone', [{ ordinal: 0, handle: 'vxlan-tunnel-addr-gone' }]),
        affinity('gone', '10.244.0.64/26'),
        handle('vxlan-tunnel-addr-gone', '10.244.0.64/26'),
      ],
    });
    const fs = runChecks(st);
    expect(ids(fs)).toEqual(['ipam-block-affinity-missing-node']);
    expect(fs[0]!.objects).toEqual(['IPAMBlock/10-244-0-64-26', 'BlockAffinity/gone-10-244-0-64-26', 'IPAMHandle/vxlan-tunnel-addr-gone']);
    expect(fs[0]!.severity).toBe('warning');
  });

  it('a handle whose pod is gone, found through the block attributes; a live containerID keeps a handle', () => {
    const st = base({
      objects: [
        block('10.244.0.0/26', 'n1', [
          { ordinal: 2, handle: 'k8s-pod-network.dead', pod: ['default', 'gone-pod'] },
          { ordinal: 3, handle: 'k8s-pod-network.live', pod: ['default', 'renamed'] },
        ]),
        handle('k8s-pod-network.dead', '10.244.0.0/26'),
        handle('k8s-pod-network.live', '10.244.0.0/26'),
      ],
      pods: [podAt('default', 'x', 'n1', '10.244.0.3', { calicoAnnotations: { 'cni.projectcalico.org/containerID': 'live' } })],
    });
    const fs = runChecks(st);
    expect(ids(fs)).toEqual(['ipam-handle-without-pod']);
    expect(fs[0]!.objects).toEqual(['IPAMHandle/k8s-pod-network.dead (pod default/gone-pod) holds 10.244.0.2']);
  });

  it('addresses allocated twice (overlapping blocks) and pods sharing an IP', () => {
    const st = base({
      objects: [
        block('10.244.0.0/26', 'n1', [{ ordinal: 4, handle: 'k8s-pod-network.a', pod: ['default', 'a'] }]),
        block('10.244.0.0/25', 'n2', [{ ordinal: 4, handle: 'k8s-pod-network.b', pod: ['default', 'b'] }]),
        handle('k8s-pod-network.a', '10.244.0.0/26'),
        handle('k8s-pod-network.b', '10.244.0.0/25'),
      ],
      pods: [podAt('default', 'a', 'n1', '10.244.0.4'), podAt('default', 'b', 'n2', '10.244.0.4')],
    });
    const fs = runChecks(st);
    expect(ids(fs).sort()).toEqual(['ipam-duplicate-address', 'pod-duplicate-ip']);
    expect(fs.every((f) => f.severity === 'error')).toBe(true);
  });

  it('pod addresses IPAM does not know, outside every pool, or in a disabled pool', () => {
    const st = makeState({
      objects: [
        pool('p', '10.244.0.0/16'),
        pool('old', '10.99.0.0/16', { disabled: true }),
        block('10.99.0.0/26', 'n1', [{ ordinal: 7, handle: 'k8s-pod-network.o', pod: ['default', 'old-pod'] }]),
        handle('k8s-pod-network.o', '10.99.0.0/26'),
      ],
      pods: [
        podAt('default', 'lost', 'n1', '10.244.3.3'),
        podAt('default', 'stray', 'n1', '172.16.0.9'),
        podAt('default', 'old-pod', 'n1', '10.99.0.7'),
        podAt('default', 'done', 'n1', '172.16.0.10', { phase: 'Succeeded' }),
      ],
    });
    const fs = runChecks(st);
    expect(ids(fs)).toEqual(['pod-ip-not-allocated', 'pod-ip-outside-pools', 'pod-ip-in-disabled-pool']);
    expect(fs[0]!.objects).toEqual(['Pod/default/lost (10.244.3.3)']);
    expect(fs[1]!.objects).toEqual(['Pod/default/stray (172.16.0.9)']);
    expect(fs[2]!.objects).toEqual(['IPPool/old', 'Pod/default/old-pod (10.99.0.7)']);
  });

  it('skips pod checks when the source has no pods (a bundle) and says so', () => {
    const st = base({ objects: [handle('k8s-pod-network.dead', '10.244.0.0/26')] });
    st.pods = undefined;
    const r = doctorReport(st);
    expect(r.findings).toEqual([]);
    expect(r.notes.join(' ')).toMatch(/bundles keep no pods/);
  });
});

describe('versions and health', () => {
  it('version skew across a minor is an error; a patch difference a warning', () => {
    const ci = { apiVersion: 'crd.projectcalico.org/v1', kind: 'ClusterInformation', metadata: { name: 'default' }, spec: { calicoVersion: 'v3.28.1' } };
    const st = makeState({ workloads: [operatorWorkload('v1.32.10'), calicoNode('v3.28.1')], objects: [ci] });
    const f = runChecks(st).find((x) => x.id === 'version-skew')!;
    expect(f.severity).toBe('error');
    expect(f.title).toContain('operator quay.io/tigera/operator:v1.32.10 = v3.27.4');
    const patch = makeState({ workloads: [operatorWorkload('v1.34.3'), calicoNode('v3.28.0')], objects: [ci] });
    expect(runChecks(patch).find((x) => x.id === 'version-skew')!.severity).toBe('warning');
    const same = makeState({ workloads: [operatorWorkload('v1.34.3'), calicoNode('v3.28.1')], objects: [ci] });
    expect(runChecks(same)).toEqual([]);
  });

  it('3.28 Installation CRD with operator v1.32.10: CRDs newer than the operator (half-done downgrade)', () => {
    const st = makeState({ workloads: [operatorWorkload('v1.32.10')], crds: [fixtureCrd('3.28.1', 'Installation')] });
    const f = runChecks(st).find((x) => x.id === 'crds-newer-than-operator')!;
    expect(f.title).toMatch(/from v3.28 or later.*v1.32.10/);
    expect(f.objects).toEqual(['CustomResourceDefinition/installations.operator.tigera.io']);
    // A CRD downgrade must replace, not apply: an apply keeps the newer fields another manager wrote (a merged schema).
    expect(f.fix).toContain('kubectl replace -f <the v3.27.4 operator-crds.yaml>');
    expect(f.fix).not.toMatch(/kubectl apply --server-side/);
    const ok = makeState({ workloads: [operatorWorkload('v1.32.10')], crds: [fixtureCrd('3.27.4', 'Installation')] });
    expect(runChecks(ok)).toEqual([]);
  });

  it('TigeraStatus Degraded/Unavailable with the message; workloads not Ready', () => {
    const ts = (name: string, conditions: any[]) => ({ apiVersion: 'operator.tigera.io/v1', kind: 'TigeraStatus', metadata: { name }, status: { conditions } });
    const st = makeState({
      workloads: [calicoNode('v3.28.1', 1, 3)],
      objects: [
        ts('ippools', [
          { type: 'Degraded', status: 'True', reason: 'ResourceNotReady', message: 'Unable to modify IP pools while Calico API server is unavailable' },
        ]),
        ts('calico', [{ type: 'Available', status: 'False', message: 'DaemonSet "calico-system/calico-node" is not available' }]),
        ts('apiserver', [{ type: 'Available', status: 'True' }]),
      ],
    });
    const fs = runChecks(st);
    expect(ids(fs)).toEqual(['tigerastatus-degraded', 'workload-not-ready', 'tigerastatus-unavailable']);
    expect(fs[0]!.title).toContain('Unable to modify IP pools while Calico API server is unavailable');
    expect(fs[1]!.title).toBe('DaemonSet calico-system/calico-node: 1 of 3 ready');
    expect(doctorExitCode(doctorReport(st))).toBe(2);
  });
});

describe('--target: schema of the target release', () => {
  it('a 3.28 Installation (ipPools[].name, allowedUses) checked against 3.27.4: fields it would prune', async () => {
    const target = await loadRelease('3.27.4', { offline: true });
    const st = makeState({ objects: [installationWith([entry('default-ipv4-ippool', '192.168.0.0/16')])], withIpam: false });
    const fs = runChecks(st, { target });
    const f = fs.find((x) => x.id === 'target-schema-prune')!;
    expect(f.objects).toEqual(['Installation/default']);
    expect(f.title).toContain('spec.calicoNetwork.ipPools[0].name');
    expect(f.title).toContain('spec.calicoNetwork.ipPools[0].allowedUses');
    const r = doctorReport(st, { target });
    expect(doctorExitCode(r)).toBe(1);
  });

  it('a value the target rejects, and a kind the target has no CRD for', async () => {
    const target = await loadRelease('3.28.1', { offline: true });
    const tier = { apiVersion: 'crd.projectcalico.org/v1', kind: 'Tier', metadata: { name: 'security' }, spec: { order: 100 } };
    const st = makeState({ objects: [pool('p', '10.0.0.0/16', { blockSize: 'big' }), tier] });
    const fs = runChecks(st, { target });
    expect(fs.find((x) => x.id === 'target-schema-reject')?.title).toMatch(/IPPool\/p .*spec.blockSize is string/);
    expect(fs.find((x) => x.id === 'target-kind-missing')?.objects).toEqual(['Tier/security']);
  });
});

describe('refinements', () => {
  it('a disabled pool whose entry already stops allocations the supported way is not reported', () => {
    const st = makeState({
      workloads: [operatorWorkload('v1.38.13')],
      objects: [
        installationWith([entry('p', '192.168.0.0/16', { disableNewAllocations: true })]),
        // As 3.30's libcalico-go stores it: assignmentMode Automatic, which v1.38 compares.
        pool('p', '192.168.0.0/16', { disabled: true, allowedUses: ['Workload', 'Tunnel'], assignmentMode: 'Automatic' }),
      ],
    });
    expect(runChecks(st)).toEqual([]);
  });

  it('Calico running without its CRDs (the destructive downgrade) is an error', () => {
    const st = makeState({ workloads: [operatorWorkload('v1.32.10'), calicoNode('v3.27.4')], withIpam: false });
    const fs = runChecks(st);
    expect(ids(fs)).toEqual(['calico-crds-missing']);
    expect(fs[0]!.fix).toContain('cni-rewind restore <bundle> --resources');
  });

  it('Calico in etcd mode (calico-etcd.yaml: no CRDs by design) is an etcd-datastore warning, not the CRD fix that would empty it', () => {
    const st = {
      ...makeState({ workloads: [calicoNode('v3.27.4')], withIpam: false }),
      datastore: { type: 'etcd' as const, evidence: 'calico-config etcd_endpoints' },
    };
    const fs = runChecks(st);
    expect(ids(fs)).toEqual(['etcd-datastore']);
    expect(fs[0]!.fix).toContain('cni-rewind backup (it reads etcd)');
    expect(fs.map((f) => f.fix).join(' ')).not.toContain('re-apply the release manifests');
  });
});

describe('entry CIDR owned by a pool the operator does not manage', () => {
  it('warns with the differing fields, and stays quiet once the pool equals the entry', () => {
    const st = makeState({
      workloads: [operatorWorkload('v1.36.16')],
      objects: [
        installationWith([entry('default-ipv4-ippool', '192.168.0.0/16', { disableNewAllocations: false })]),
        pool('default-ipv4-ippool', '192.168.0.0/16', { natOutgoing: false, allowedUses: ['Workload', 'Tunnel'] }),
      ],
    });
    const fs = runChecks(st);
    expect(ids(fs)).toEqual(['pool-cidr-not-owned']);
    expect(fs[0]!.fix).toContain('natOutgoing: "Disabled"');
    st.objects['ippools.crd.projectcalico.org']![0]!.spec.natOutgoing = true;
    expect(runChecks(st)).toEqual([]);
  });

  it('on v1.34 says no entry can equal a pool whose natOutgoing false converts to "", and offers the label only', () => {
    const st = makeState({
      workloads: [operatorWorkload('v1.34.3')],
      objects: [
        installationWith([entry('default-ipv4-ippool', '192.168.0.0/16', { natOutgoing: 'Disabled' })]),
        pool('default-ipv4-ippool', '192.168.0.0/16', { natOutgoing: false, allowedUses: ['Workload', 'Tunnel'] }),
      ],
    });
    const fs = runChecks(st);
    expect(ids(fs)).toEqual(['pool-cidr-not-owned']);
    expect(fs[0]!.fix).toMatch(/^No entry can equal this pool: its natOutgoing/);
    expect(fs[0]!.fix).toContain('kubectl label ippools.projectcalico.org default-ipv4-ippool app.kubernetes.io/managed-by=tigera-operator');
  });
});
