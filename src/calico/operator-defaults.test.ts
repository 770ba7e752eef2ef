import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../kube/types.js';
import { isOperatorDefault, operatorPoolNameForCidr, valueAt } from './operator-defaults.js';

const inst = (calicoNetwork: any, extra: any = {}): KubeObject => ({
  apiVersion: 'operator.tigera.io/v1',
  kind: 'Installation',
  metadata: { name: 'default' },
  spec: { calicoNetwork, ...extra },
});
const pool = (name: string, cidr: string): KubeObject => ({ apiVersion: 'crd.projectcalico.org/v1', kind: 'IPPool', metadata: { name }, spec: { cidr } });

describe('operator defaults of the Installation (tigera/operator fillDefaults, v1.34-v1.38)', () => {
  it('names pools like ippool/defaults.go cidrToName', () => {
    expect(operatorPoolNameForCidr('10.9.0.0/16')).toBe('10.9.0.0-16');
    expect(operatorPoolNameForCidr('fd00:10:244::/64')).toBe('fd00.0010.0244.0000.0000.0000.0000.0000-64');
  });

  it('the policy setup timeout 0 is a default only for Calico CNI on iptables', () => {
    const p = 'spec.calicoNetwork.linuxPolicySetupTimeoutSeconds';
    expect(isOperatorDefault(inst({ linuxPolicySetupTimeoutSeconds: 0 }), p, [])).toBe(true);
    expect(isOperatorDefault(inst({ linuxPolicySetupTimeoutSeconds: 10 }), p, [])).toBe(false);
    expect(isOperatorDefault(inst({ linuxPolicySetupTimeoutSeconds: 0, linuxDataplane: 'BPF' }), p, [])).toBe(false);
    expect(isOperatorDefault(inst({ linuxPolicySetupTimeoutSeconds: 0 }, { cni: { type: 'AmazonVPC' } }), p, [])).toBe(false);
  });

  it('pool names: the live pool of that CIDR, the default-ipvN-ippool names, else the CIDR-derived name', () => {
    const three = inst({
      ipPools: [
        { cidr: '10.0.0.0/16', name: 'a' },
        { cidr: '10.1.0.0/16', name: '10.1.0.0-16' },
        { cidr: '10.2.0.0/16', name: 'c' },
      ],
    });
    expect(isOperatorDefault(three, 'spec.calicoNetwork.ipPools[0].name', [pool('a', '10.0.0.0/16')])).toBe(true);
    expect(isOperatorDefault(three, 'spec.calicoNetwork.ipPools[1].name', [])).toBe(true);
    expect(isOperatorDefault(three, 'spec.calicoNetwork.ipPools[2].name', [])).toBe(false);
    const dual = inst({
      ipPools: [
        { cidr: '10.0.0.0/16', name: 'default-ipv4-ippool' },
        { cidr: 'fd00::/48', name: 'default-ipv6-ippool' },
      ],
    });
    expect(isOperatorDefault(dual, 'spec.calicoNetwork.ipPools[1].name', [])).toBe(true);
  });

  it('fields the operator never fills (sysctl) are always user-set; later defaults (allowedUses, disableNewAllocations, assignmentMode)', () => {
    const i = inst({
      sysctl: [],
      ipPools: [{ cidr: '10.0.0.0/16', allowedUses: ['Tunnel', 'Workload'], disableNewAllocations: false, assignmentMode: 'Manual' }],
    });
    expect(isOperatorDefault(i, 'spec.calicoNetwork.sysctl', [])).toBe(false);
    expect(isOperatorDefault(i, 'spec.calicoNetwork.ipPools[0].allowedUses', [])).toBe(false);
    expect(isOperatorDefault(i, 'spec.calicoNetwork.ipPools[0].disableNewAllocations', [])).toBe(true);
    expect(isOperatorDefault(i, 'spec.calicoNetwork.ipPools[0].assignmentMode', [])).toBe(false);
    expect(valueAt(i, 'spec.calicoNetwork.ipPools[0].allowedUses')).toEqual(['Tunnel', 'Workload']);
    expect(valueAt(i, 'spec.calicoNetwork.ipPools[3].cidr')).toBeUndefined();
  });
});
