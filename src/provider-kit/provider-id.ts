/**
 * Kubernetes `spec.providerID` parsing: which provider a node belongs to and where its machine is.
 *   aws:///us-east-1a/i-0abc         -> aws, zone us-east-1a, instance i-0abc (the AWS provider asks EC2 for
 *                                       the zone's region: Local and Wavelength zones are not region + letter)
 *   gce://my-project/europe-west1-b/node-1 -> gcp, project, zone, instance name
 *   vsphere://4237e7b1-...            -> vsphere, the VM's BIOS UUID (found with SearchIndex.FindByUuid)
 *   azure:///subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/VM
 *   azure:///subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/virtualMachineScaleSets/SS/virtualMachines/ID
 *                                     -> azure, a VM or a scale set instance (what the Azure cloud provider sets)
 */
export type ProviderIdInfo =
  | { provider: 'aws'; zone: string; instanceId: string }
  | { provider: 'gcp'; project: string; zone: string; instance: string }
  | { provider: 'vsphere'; uuid: string }
  | { provider: 'azure'; subscription: string; resourceGroup: string; vm?: string; vmss?: string; instanceId?: string }
  | { provider: 'unknown'; raw?: string };

export function parseProviderId(providerID: string | undefined): ProviderIdInfo {
  if (!providerID) return { provider: 'unknown' };
  let m = /^aws:\/\/\/?([a-z0-9-]+)?\/(i-[0-9a-f]+)$/.exec(providerID);
  if (m) return { provider: 'aws', zone: m[1] ?? '', instanceId: m[2]! };
  m = /^gce:\/\/([^/]+)\/([^/]+)\/([^/]+)$/.exec(providerID);
  if (m) return { provider: 'gcp', project: m[1]!, zone: m[2]!, instance: m[3]! };
  // What the vSphere cloud provider sets: the VM's BIOS UUID (config.uuid).
  m = /^vsphere:\/\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/i.exec(providerID);
  if (m) return { provider: 'vsphere', uuid: m[1]!.toLowerCase() };
  m =
    /^azure:\/\/\/subscriptions\/([^/]+)\/resourceGroups\/([^/]+)\/providers\/Microsoft\.Compute\/(?:virtualMachines\/([^/]+)|virtualMachineScaleSets\/([^/]+)\/virtualMachines\/([^/]+))$/i.exec(
      providerID,
    );
  if (m) return { provider: 'azure', subscription: m[1]!, resourceGroup: m[2]!, ...(m[3] ? { vm: m[3] } : { vmss: m[4]!, instanceId: m[5]! }) };
  return { provider: 'unknown', raw: providerID };
}
