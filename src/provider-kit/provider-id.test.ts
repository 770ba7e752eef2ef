import { describe, expect, it } from 'vitest';
import { parseProviderId } from './provider-id.js';

describe('parseProviderId', () => {
  it('reads AWS ids with their zone (the region comes from EC2, see providers/aws)', () => {
    expect(parseProviderId('aws:///us-east-1a/i-0abc123')).toEqual({ provider: 'aws', zone: 'us-east-1a', instanceId: 'i-0abc123' });
    expect(parseProviderId('aws:///us-west-2-lax-1a/i-0123456789abcdef0')).toEqual({
      provider: 'aws',
      zone: 'us-west-2-lax-1a',
      instanceId: 'i-0123456789abcdef0',
    });
  });
  it('reads GCE ids', () => {
    expect(parseProviderId('gce://proj-1/europe-west1-b/node-a')).toEqual({ provider: 'gcp', project: 'proj-1', zone: 'europe-west1-b', instance: 'node-a' });
  });
  it('reads vSphere ids (the VM BIOS UUID)', () => {
    expect(parseProviderId('vsphere://4237E7B1-5E26-8F8D-6D2C-5B1A3A63F1C2')).toEqual({ provider: 'vsphere', uuid: '4237e7b1-5e26-8f8d-6d2c-5b1a3a63f1c2' });
    expect(parseProviderId('vsphere://not-a-uuid')).toMatchObject({ provider: 'unknown' });
  });
  it('reads Azure VM and scale set instance ids', () => {
    expect(parseProviderId('azure:///subscriptions/0000-1/resourceGroups/mc_rg_aks/providers/Microsoft.Compute/virtualMachines/worker-1')).toEqual({
      provider: 'azure',
      subscription: '0000-1',
      resourceGroup: 'mc_rg_aks',
      vm: 'worker-1',
    });
    expect(
      parseProviderId(
        'azure:///subscriptions/0000-1/resourceGroups/MC_rg/providers/Microsoft.Compute/virtualMachineScaleSets/aks-nodepool1-vmss/virtualMachines/3',
      ),
    ).toEqual({ provider: 'azure', subscription: '0000-1', resourceGroup: 'MC_rg', vmss: 'aks-nodepool1-vmss', instanceId: '3' });
    expect(parseProviderId('azure:///subscriptions/0000-1/resourceGroups/rg/providers/Microsoft.Compute/disks/d1')).toMatchObject({ provider: 'unknown' });
  });
  it('says unknown for anything else', () => {
    expect(parseProviderId(undefined)).toEqual({ provider: 'unknown' });
    expect(parseProviderId('kind://docker/kind/kind-control-plane')).toEqual({ provider: 'unknown', raw: 'kind://docker/kind/kind-control-plane' });
    expect(parseProviderId('aws:///us-east-1a/not-an-instance')).toMatchObject({ provider: 'unknown' });
  });
});
