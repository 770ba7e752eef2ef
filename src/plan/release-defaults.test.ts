import { describe, expect, it } from 'vitest';
import { loadRelease } from '../calico/release.js';
import type { KubeObject } from '../kube/types.js';
import { computeFindings } from './findings.js';

/** 3.30.7 -> 3.28.1 with the real CRDs: what v1.38 and 3.30's libcalico-go write, and what a user sets. */
describe("fields 3.28's CRDs prune that 3.30 wrote by itself need no --allow-field-loss", async () => {
  const r30 = await loadRelease('3.30.7');
  const r28 = await loadRelease('3.28.1');
  const ippool = (assignmentMode: string): KubeObject => ({
    apiVersion: 'crd.projectcalico.org/v1',
    kind: 'IPPool',
    metadata: { name: 'default-ipv4-ippool' },
    spec: { cidr: '192.168.0.0/16', blockSize: 26, ipipMode: 'Never', vxlanMode: 'CrossSubnet', natOutgoing: true, nodeSelector: 'all()', assignmentMode },
  });
  const felix = (nftablesMode: string): KubeObject => ({
    apiVersion: 'crd.projectcalico.org/v1',
    kind: 'FelixConfiguration',
    metadata: { name: 'default' },
    spec: { nftablesMode },
  });
  const installation = (linuxDataplane: string): KubeObject => ({
    apiVersion: 'operator.tigera.io/v1',
    kind: 'Installation',
    metadata: { name: 'default' },
    spec: { calicoNetwork: { linuxDataplane }, variant: 'Calico', cni: { type: 'Calico', ipam: { type: 'Calico' } } },
  });
  const findings = (pool: KubeObject, fc: KubeObject, inst?: KubeObject) =>
    computeFindings(
      {
        crds: r30.crds,
        objects: new Map(
          Object.entries({
            'ippools.crd.projectcalico.org': [pool],
            'felixconfigurations.crd.projectcalico.org': [fc],
            ...(inst ? { 'installations.operator.tigera.io': [inst] } : {}),
          }),
        ),
      },
      r28,
      { version: 'v3.30.7' },
      new Set(),
    ).findings;

  it('assignmentMode Automatic and the nftablesMode the operator derives from the dataplane are dropped as defaults (info)', () => {
    const f = findings(ippool('Automatic'), felix('Disabled'), installation('Iptables'));
    const ids = f.map((x) => x.id);
    expect(ids).not.toContain('ippool-fields-pruned');
    expect(ids).not.toContain('felixconfiguration-fields-pruned');
    expect(f.find((x) => x.id === 'ippool-defaults-pruned')).toMatchObject({
      severity: 'info',
      details: ['IPPool/default-ipv4-ippool: spec.assignmentMode: "Automatic"'],
    });
    expect(f.find((x) => x.id === 'felixconfiguration-defaults-pruned')).toMatchObject({ severity: 'info', objects: ['FelixConfiguration/default'] });
  });

  // 3.30's libcalico-go (backend/k8s/resources/ipam_affinity.go toV3) writes every BlockAffinity with spec.type, "host"
  // unless it is a virtual affinity, and reads an unset type as "host" ("older versions ... assuming host").
  const affinity = (type: string): KubeObject => ({
    apiVersion: 'crd.projectcalico.org/v1',
    kind: 'BlockAffinity',
    metadata: { name: `node-1-10-100-0-0-26${type === 'host' ? '' : `-${type}`}` },
    spec: { state: 'confirmed', node: 'node-1', cidr: '10.100.0.0/26', deleted: 'false', type },
  });
  const affinityFindings = (...objs: KubeObject[]) =>
    computeFindings({ crds: r30.crds, objects: new Map([['blockaffinities.crd.projectcalico.org', objs]]) }, r28, { version: 'v3.30.7' }, new Set()).findings;

  it('a BlockAffinity of type host (what 3.30 writes for every node) is dropped as a default; a virtual one needs the flag', () => {
    const host = affinityFindings(affinity('host'));
    expect(host.map((x) => x.id)).not.toContain('blockaffinity-fields-pruned');
    expect(host.find((x) => x.id === 'blockaffinity-defaults-pruned')).toMatchObject({
      severity: 'info',
      details: ['BlockAffinity/node-1-10-100-0-0-26: spec.type: "host"'],
    });
    const virtual = affinityFindings(affinity('host'), affinity('virtual'));
    expect(virtual.find((x) => x.id === 'blockaffinity-fields-pruned')).toMatchObject({
      severity: 'error',
      objects: ['BlockAffinity/node-1-10-100-0-0-26-virtual'],
      flag: 'allow-field-loss',
    });
  });

  it("a user's value still needs the flag: assignmentMode Manual, nftablesMode that disagrees with the dataplane, or with no operator", () => {
    const manual = findings(ippool('Manual'), felix('Disabled'), installation('Iptables'));
    expect(manual.find((x) => x.id === 'ippool-fields-pruned')).toMatchObject({ severity: 'error', flag: 'allow-field-loss', satisfied: false });
    const enabled = findings(ippool('Automatic'), felix('Enabled'), installation('Iptables'));
    expect(enabled.find((x) => x.id === 'felixconfiguration-fields-pruned')).toMatchObject({ severity: 'error' });
    const noOperator = findings(ippool('Automatic'), felix('Disabled'));
    expect(noOperator.find((x) => x.id === 'felixconfiguration-fields-pruned')).toMatchObject({ severity: 'error' });
  });
});
