/**
 * A Calico someone else installs and upgrades (issue 31, item 4): plan refuses to change its version (exit 5) and
 * names the provider's own procedure, since the provider puts its own release back over whatever a plan rolls out.
 * Reading and writing Calico's data (export, backup, diff, restore of policies) goes on as for any install.
 *
 * The procedures, from the providers' documentation:
 * - AKS (learn.microsoft.com/azure/aks/use-network-policies; docs.tigera.io/calico/latest/getting-started/kubernetes/
 *   managed-public-cloud/aks): with `--network-policy calico` "Calico components are installed, upgraded, and
 *   supported by Azure" and "you cannot change the Calico version": it comes with the cluster's Kubernetes version
 *   (`az aks upgrade --kubernetes-version`). A Calico of one's own needs `az aks update --network-policy none` first
 *   (docs.tigera.io/.../managed-public-cloud/aks-migrate).
 * - GKE (docs.cloud.google.com/kubernetes-engine/docs/how-to/network-policy; docs.tigera.io/.../managed-public-cloud/
 *   gke): `--enable-network-policy` installs a Calico GKE manages; it is upgraded with the cluster
 *   (`gcloud container clusters upgrade`).
 * - The addon manager (kubernetes/cluster/addons/addon-manager/README.md): with `addonmanager.kubernetes.io/mode:
 *   Reconcile` it re-applies the manifests in the control plane's addons folder and reverts every change made beside
 *   them; with `EnsureExists` objects are "checked for existence only. Users can edit these addons as they want", so
 *   a plan goes ahead there.
 * - RKE2 (docs.rke2.io, networking basics): the rke2-calico chart's version comes with RKE2's; its values are set by
 *   a HelmChartConfig.
 */
import { RefusedError } from '../core/errors.js';
import type { InstallMethod } from './install-method.js';

/** The provider's procedure for a Calico change, by `managedBy` (install-method.ts). */
export function managedProcedure(managedBy: string): string {
  if (managedBy === 'AKS')
    return "AKS upgrades its managed Calico with the cluster's Kubernetes version: az aks upgrade --kubernetes-version <version> (for a Calico of your own: az aks update --network-policy none, then install it)";
  if (managedBy === 'GKE')
    return 'GKE manages this Calico (network policy enforcement) and upgrades it with the cluster: gcloud container clusters upgrade <cluster>';
  if (managedBy === 'RKE2') return "RKE2's rke2-calico chart comes with the RKE2 release: upgrade RKE2, and set its values with a HelmChartConfig rke2-calico";
  return "the addon manager re-applies its manifests and reverts every other change: change Calico's manifests in the control plane's addons folder";
}

/** plan's refusal (exit 5) for a managed Calico, before anything else is read. */
export function refuseManagedUpgrade(method: Pick<InstallMethod, 'managedBy' | 'method' | 'addonMode'>, target: string): void {
  if (!method.managedBy) return;
  const provider = ['AKS', 'GKE', 'RKE2'].includes(method.managedBy);
  if (!provider && method.addonMode !== 'Reconcile') return;
  throw new RefusedError(`this Calico is managed by ${method.managedBy}: a plan to ${target} would be reverted by it, so no plan was made`, {
    hint: `${managedProcedure(method.managedBy)}; export, backup, diff and restore of Calico's policies still work here`,
  });
}
