/**
 * A node's machine for the Azure provider: a standalone VM (or a flexible scale set's VM) or a uniform scale set
 * instance. Both have a storage profile, deallocate/start/restart, and take a new storage profile to swap disks:
 * a VM through PATCH (virtualMachines.update), a scale set instance through PUT (its only update).
 */
import type { ComputeManagementClient, StorageProfile } from '@azure/arm-compute';
import type { NodeTarget } from '../../src/provider-kit/index.js';
import { deviceOf } from './arm.js';

export type Compute = ComputeManagementClient;
type Call = <T>(op: string, fn: (c: Compute) => Promise<T>) => Promise<T>;

export interface MachineOps {
  get(): Promise<{ storageProfile?: StorageProfile }>;
  deallocate(): Promise<void>;
  start(): Promise<void>;
  restart(): Promise<void>;
  /** Point each given slot (lun undefined: the OS disk) at a new disk; returns device -> the disk id it replaced. */
  swapDisks(disks: { lun?: number; id: string; name: string }[]): Promise<Map<string, string>>;
}

export function machineOps(t: NodeTarget, lro: { updateIntervalInMs: number }, call: Call): MachineOps {
  const { resourceGroup: rg, vm, vmss, instanceId } = t.location as Record<string, string>;
  const swapInto = (sp: StorageProfile, disks: { lun?: number; id: string; name: string }[]) => {
    const replaced = new Map<string, string>();
    for (const d of disks) {
      const slot = d.lun === undefined ? sp.osDisk : sp.dataDisks?.find((x) => x.lun === d.lun);
      if (!slot) throw new Error(`${t.machine} has no ${deviceOf(d.lun)} disk slot any more`);
      if (slot.managedDisk?.id) replaced.set(deviceOf(d.lun), slot.managedDisk.id);
      slot.managedDisk = { ...(slot.managedDisk ?? {}), id: d.id };
      slot.name = d.name;
      if (d.lun !== undefined) (slot as { createOption?: string }).createOption = 'Attach';
    }
    return replaced;
  };
  if (vm) {
    return {
      get: () => call('get VM', (c) => c.virtualMachines.get(rg, vm)),
      deallocate: () => call('deallocate', (c) => c.virtualMachines.deallocate(rg, vm, lro)),
      start: () => call('start', (c) => c.virtualMachines.start(rg, vm, lro)),
      restart: () => call('restart', (c) => c.virtualMachines.restart(rg, vm, lro)),
      async swapDisks(disks) {
        const cur = await call('get VM', (c) => c.virtualMachines.get(rg, vm));
        const sp = cur.storageProfile ?? {};
        const replaced = swapInto(sp, disks);
        await call('swap disks', (c) => c.virtualMachines.update(rg, vm, { storageProfile: { osDisk: sp.osDisk, dataDisks: sp.dataDisks } }, lro));
        return replaced;
      },
    };
  }
  return {
    get: () => call('get scale set instance', (c) => c.virtualMachineScaleSetVMs.get(rg, vmss!, instanceId!)),
    deallocate: () => call('deallocate', (c) => c.virtualMachineScaleSetVMs.deallocate(rg, vmss!, instanceId!, lro)),
    start: () => call('start', (c) => c.virtualMachineScaleSetVMs.start(rg, vmss!, instanceId!, lro)),
    restart: () => call('restart', (c) => c.virtualMachineScaleSetVMs.restart(rg, vmss!, instanceId!, lro)),
    async swapDisks(disks) {
      const cur = await call('get scale set instance', (c) => c.virtualMachineScaleSetVMs.get(rg, vmss!, instanceId!));
      const replaced = swapInto(cur.storageProfile ?? {}, disks);
      await call('swap disks', (c) => c.virtualMachineScaleSetVMs.update(rg, vmss!, instanceId!, cur, lro));
      return replaced;
    },
  };
}
