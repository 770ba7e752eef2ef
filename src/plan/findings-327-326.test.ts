import { describe, expect, it } from 'vitest';
import { loadRelease } from '../calico/release.js';
import type { KubeObject } from '../kube/types.js';
import { computeFindings } from './findings.js';

describe('3.27 -> 3.26.5 with the real CRDs: what v1.32 and 3.27 write by themselves needs no flag (issue 30)', async () => {
  const [r326, r327] = await Promise.all(['3.26.5', '3.27.5'].map((v) => loadRelease(v, { offline: true })));
  const findings = (inst: KubeObject, felix: KubeObject[] = []) =>
    computeFindings(
      {
        crds: r327.crds,
        objects: new Map([
          ['installations.operator.tigera.io', [inst]],
          ['felixconfigurations.crd.projectcalico.org', felix],
        ]),
      },
      r326,
      { version: 'v3.27.5' },
      new Set(),
    ).findings;
  const refusals = (inst: KubeObject, felix: KubeObject[] = []) =>
    findings(inst, felix)
      .filter((f) => f.severity === 'error')
      .map((f) => `${f.id}: ${f.details?.join('; ')}`);
  /** Installation default as operator v1.32.12 wrote it on the path matrix's 3.27.5 install (custom-resources.yaml). */
  const with327 = (windowsDataplane: string): KubeObject => ({
    apiVersion: 'operator.tigera.io/v1',
    kind: 'Installation',
    metadata: { name: 'default' },
    spec: {
      calicoNetwork: {
        bgp: 'Enabled',
        hostPorts: 'Enabled',
        ipPools: [
          { blockSize: 26, cidr: '192.168.0.0/16', disableBGPExport: false, encapsulation: 'VXLANCrossSubnet', natOutgoing: 'Enabled', nodeSelector: 'all()' },
        ],
        linuxDataplane: 'Iptables',
        multiInterfaceMode: 'None',
        nodeAddressAutodetectionV4: { firstFound: true },
        windowsDataplane,
      },
      cni: { ipam: { type: 'Calico' }, type: 'Calico' },
      controlPlaneReplicas: 2,
      flexVolumePath: '/usr/libexec/kubernetes/kubelet-plugins/volume/exec/',
      kubeletVolumePluginPath: '/var/lib/kubelet',
      logging: { cni: { logFileMaxAgeDays: 30, logFileMaxCount: 10, logFileMaxSize: '100Mi', logSeverity: 'Info' } },
      nodeUpdateStrategy: { rollingUpdate: { maxUnavailable: 1 }, type: 'RollingUpdate' },
      nonPrivileged: 'Disabled',
      variant: 'Calico',
    },
  });

  it('windowsDataplane Disabled is the operator default (core_controller.go:544-548); HNS is a setting 3.26 cannot hold', () => {
    expect(refusals(with327('Disabled'))).toEqual([]);
    expect(refusals(with327('HNS'))).toEqual(['installation-fields-lost: spec.calicoNetwork.windowsDataplane: "HNS" (unknown to v3.26.5)']);
  });

  /** FelixConfiguration default as 3.27.5's calico-node start-up creates it (clientv3 setDefaults fills the bpf* two). */
  const felix = (spec: Record<string, unknown>): KubeObject => ({
    apiVersion: 'crd.projectcalico.org/v1',
    kind: 'FelixConfiguration',
    metadata: { name: 'default' },
    spec: { floatingIPs: 'Disabled', logSeverityScreen: 'Info', reportingInterval: '0s', ...spec },
  });

  it("FelixConfiguration's connect-time LB fields as 3.27's clientv3 setDefaults writes them are dropped; other values need the flag", () => {
    const inst = with327('Disabled');
    const fresh = felix({ bpfConnectTimeLoadBalancing: 'TCP', bpfHostNetworkedNATWithoutCTLB: 'Enabled' });
    expect(refusals(inst, [fresh])).toEqual([]);
    expect(findings(inst, [fresh]).find((f) => f.id === 'felixconfiguration-defaults-pruned')?.details).toEqual([
      'FelixConfiguration/default: spec.bpfConnectTimeLoadBalancing: "TCP"',
      'FelixConfiguration/default: spec.bpfHostNetworkedNATWithoutCTLB: "Enabled"',
    ]);
    // Derived from the deprecated boolean, which 3.26 keeps.
    const derived = felix({ bpfConnectTimeLoadBalancingEnabled: false, bpfConnectTimeLoadBalancing: 'Disabled', bpfHostNetworkedNATWithoutCTLB: 'Disabled' });
    expect(refusals(inst, [derived])).toEqual([]);
    // Set by a user: 3.26 cannot hold them.
    const set = felix({ bpfConnectTimeLoadBalancing: 'Disabled', bpfHostNetworkedNATWithoutCTLB: 'Enabled' });
    expect(refusals(inst, [set])).toEqual(['felixconfiguration-fields-pruned: spec.bpfConnectTimeLoadBalancing (unknown to v3.26.5)']);
  });
});
