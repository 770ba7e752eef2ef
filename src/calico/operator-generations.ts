/**
 * What each tigera-operator generation (one per Calico minor) writes into the cluster on its own: the finalizers it
 * puts on Installation `default`, the TigeraStatus objects it reports in, and the FelixConfiguration fields it fills
 * in. Read in the operator sources; see docs/calico-differences.md "What each operator generation writes".
 */
import type { KubeObject } from '../kube/types.js';
import { compareVersions, POOL_CONTROLLER_REPORT } from './knowledge.js';

/**
 * The Installation finalizers and TigeraStatus names each operator generation adds, by the Calico minor it ships
 * with (OPERATOR_VERSIONS), read in tigera/operator:
 * - finalizers: pkg/render/finalizers.go (v1.32.10 and older: CalicoFinalizer in
 *   pkg/controller/installation/core_controller.go), set on the Installation by utils.SetInstallationFinalizer /
 *   utils.MaintainInstallationFinalizer in the installation, apiserver, whisker, goldmane, clusterconnection (guardian)
 *   and gatewayapi controllers;
 * - TigeraStatus names: the name each controller gives status.New (pkg/controller/.../*_controller.go), counting only
 *   controllers that run for Calico (internal/controller/controllers.go; not those whose Add returns early without the
 *   Enterprise CRDs, e.g. nonclusterhost and v1.40's istio).
 * An older operator does not know a newer generation's names and so never clears them: after an in-place downgrade
 * below `since`, the newer finalizers make every later `kubectl delete installation default` hang, and the newer
 * TigeraStatus objects keep saying whatever they last said (e.g. `ippools` Degraded) for ever.
 */
export interface OperatorGeneration {
  /** Calico minor whose operator first writes these, `v3.N`; a version has the rows not newer than it. */
  since: string;
  installationFinalizers: string[];
  tigeraStatuses: string[];
  /** Finalizers the generation puts on its other custom resources (by CRD name), cleared only by its own controller. */
  customResourceFinalizers?: { crd: string; finalizer: string }[];
}
export const OPERATOR_GENERATIONS: OperatorGeneration[] = [
  // v1.30.11 core_controller.go:93 and v1.32.10 core_controller.go:91 CalicoFinalizer; still OperatorCompleteFinalizer
  // in v1.34.3-v1.42.3 finalizers.go:21. The TigeraStatus names these operators share with all later ones are left out.
  { since: 'v3.0', installationFinalizers: ['tigera.io/operator-cleanup'], tigeraStatuses: [] },
  {
    // v1.34.3 finalizers.go:25,29 (apiserver_controller.go:555, core_controller.go:869); ippool/pool_controller.go:50.
    since: 'v3.28',
    installationFinalizers: ['operator.tigera.io/installation-controller', 'operator.tigera.io/apiserver-controller'],
    tigeraStatuses: [POOL_CONTROLLER_REPORT],
  },
  // v1.36.16 (3.29) adds none for Calico: its new report, non-cluster-hosts, is Enterprise only.
  {
    // v1.38.13 finalizers.go:33,41,37 (whisker/controller.go:289, goldmane/controller.go:260,
    // clusterconnection_controller.go:472); status.New "whisker", "goldmane", "gatewayapi" (gatewayapi_controller.go:84,
    // which adds no finalizer yet). 3.30's custom-resources.yaml creates Whisker and Goldmane: every default install.
    since: 'v3.30',
    installationFinalizers: ['operator.tigera.io/whisker-controller', 'operator.tigera.io/goldmane-controller', 'operator.tigera.io/guardian-controller'],
    tigeraStatuses: ['whisker', 'goldmane', 'gatewayapi'],
  },
  {
    // v1.40.15 finalizers.go:45 (gatewayapi_controller.go:487); kubeproxy/controller.go:42 "kubeproxy-monitor".
    since: 'v3.31',
    installationFinalizers: ['operator.tigera.io/gatewayapi-controller'],
    tigeraStatuses: ['kubeproxy-monitor'],
  },
  {
    // v1.42.3 istio_controller.go:47 "istio": its Add no longer returns early without the Enterprise CRDs. Its
    // maintainFinalizer (istio_controller.go:337-363) puts pkg/render/istio/istio.go:72 IstioFinalizer on each Istio
    // object and removes it only after undoing the Istio settings in FelixConfiguration; older operators do not know
    // the kind, so after a downgrade the Istio objects, and with them their CRD, could never be deleted.
    since: 'v3.32',
    installationFinalizers: [],
    tigeraStatuses: ['istio'],
    customResourceFinalizers: [{ crd: 'istios.operator.tigera.io', finalizer: 'operator.tigera.io/calico-istio' }],
  },
];

/** The newer operators' finalizers and TigeraStatus names an operator of Calico `target` does not handle. */
export function leftoversUnknownTo(target: string): {
  installationFinalizers: string[];
  tigeraStatuses: string[];
  customResourceFinalizers: { crd: string; finalizer: string }[];
} {
  const newer = OPERATOR_GENERATIONS.filter((r) => compareVersions(target, `${r.since}.0`) < 0);
  return {
    installationFinalizers: newer.flatMap((r) => r.installationFinalizers),
    tigeraStatuses: newer.flatMap((r) => r.tigeraStatuses),
    customResourceFinalizers: newer.flatMap((r) => r.customResourceFinalizers ?? []),
  };
}

/** The Installation finalizers the operator of Calico `calicoVersion` sets and clears itself. */
export function installationFinalizersOf(calicoVersion: string): string[] {
  return OPERATOR_GENERATIONS.filter((r) => compareVersions(calicoVersion, `${r.since}.0`) >= 0).flatMap((r) => r.installationFinalizers);
}

/** A finalizer in the tigera operator's names (every generation's: `operator.tigera.io/...`, `tigera.io/...`). */
export function isOperatorFinalizer(finalizer: string): boolean {
  return finalizer.startsWith('operator.tigera.io/') || finalizer.startsWith('tigera.io/');
}

/**
 * Of an Installation's finalizers, those in the tigera operator's names that the operator of Calico `calicoVersion`
 * does not define (`undefined`: an operator of no known generation, which is taken to define none). Its controllers
 * never remove such a finalizer, and its core controller waits for every finalizer but its own before it tears
 * Calico down and clears its own (v1.34.3+ core_controller.go "Waiting for finalization to complete"), so one left
 * makes every delete of the Installation hang. A name no table row lists (a newer operator's, or a patch release's)
 * counts too: an operator that does define it puts it back when it reconciles. Other tools' finalizers never count.
 */
export function operatorFinalizersNotOf(finalizers: string[], calicoVersion: string | undefined): string[] {
  const own = new Set(calicoVersion ? installationFinalizersOf(calicoVersion) : []);
  return finalizers.filter((f) => isOperatorFinalizer(f) && !own.has(f));
}

/**
 * Fields of FelixConfiguration `default` that the tigera operator writes on its own, by the Calico minor whose
 * operator first writes them (a version has every row not newer than it). Read in tigera/operator
 * pkg/controller/installation/core_controller.go setDefaultsOnFelixConfiguration (and the functions next to it)
 * and bpf.go of v1.30.11, v1.32.10, v1.32.12, v1.34.3, v1.34.13, v1.36.16, v1.38.13, v1.40.15 and v1.42.3; seen
 * live: v1.34.3 writes `bpfEnabled: false` within seconds of starting. Most are filled only where unset; those
 * marked `fromInstallation` are set from the Installation on every reconcile, over any value (`nftablesMode` from
 * its linuxDataplane, `programClusterRoutes` from its clusterRoutingMode), so after a change they hold what the
 * target's generation makes of the Installation, which the Installation's own comparison covers. A value the
 * operator writes where the bundle has none is that operator's default, not a change to the user's data.
 * Not here: `dnsTrustedServers`, which every generation (v1.32.10 core_controller.go:1672, v1.40.15 :1935) writes
 * for Calico Enterprise only.
 */
export const OPERATOR_FILLED_FELIX_FIELDS: { since: string; fields: string[]; fromInstallation?: true }[] = [
  // v1.30.11 core_controller.go:1647,1656 (EKS/AKS with their CNI), 1670.
  { since: 'v3.0', fields: ['routeTableRange', 'healthPort'] },
  // v1.32.10 core_controller.go:1668.
  { since: 'v3.27', fields: ['vxlanVNI'] },
  // v1.34.3 bpf.go:97,124. bpfEnabled is also turned off where the Installation is not BPF (v1.40.15
  // core_controller.go:2030, v1.34.3 :1782): a bundle's `true` turned `false` changes the dataplane, so it stays a difference.
  { since: 'v3.28', fields: ['bpfEnabled', 'bpfHostConntrackBypass'] },
  // v1.36.16 core_controller.go:1668,1673 setNftablesMode (the Installation's linuxDataplane is defaulted, :535):
  // Enabled or Disabled; v1.42.3 :1901-1915 writes Auto for an nftables dataplane without eBPF.
  { since: 'v3.29', fields: ['nftablesMode'], fromInstallation: true },
  // v1.40.15 core_controller.go:1922-1923 (4789; 8472 on MKE with eBPF); gatewayapi_controller.go:467, only
  // while a GatewayAPI resource exists.
  { since: 'v3.31', fields: ['vxlanPort', 'policySyncPathPrefix'] },
  // v1.42.3 core_controller.go:2091-2092 setClusterRoutingOnFelixConfiguration, once clusterRoutingMode is set. It
  // sets BGPConfiguration default's too (:2117-2118), not modelled: only a 3.32 Installation has clusterRoutingMode,
  // and no shipped release is newer.
  { since: 'v3.32', fields: ['programClusterRoutes'], fromInstallation: true },
];

/** The rows of OPERATOR_FILLED_FELIX_FIELDS the operator of Calico `calicoVersion` writes; `undefined`: any generation's. */
function felixRowsOf(calicoVersion: string | undefined) {
  return OPERATOR_FILLED_FELIX_FIELDS.filter((r) => calicoVersion === undefined || compareVersions(calicoVersion, `${r.since}.0`) >= 0);
}

/**
 * The fields the operator of Calico `calicoVersion` writes into FelixConfiguration `default`; `undefined` stands
 * for an operator of no known generation (an image tag the tables do not map): what any generation writes.
 */
export function felixFieldsFilledBy(calicoVersion: string | undefined): string[] {
  return felixRowsOf(calicoVersion).flatMap((r) => r.fields);
}

/** The fields the operator of Calico `calicoVersion` sets from the Installation over any value (`fromInstallation`). */
export function felixFieldsSetFromInstallationBy(calicoVersion: string | undefined): string[] {
  return felixRowsOf(calicoVersion)
    .filter((r) => r.fromInstallation)
    .flatMap((r) => r.fields);
}

/** The fields the operator of `calicoVersion` writes that the live FelixConfiguration `default` has and the bundle's (`expected`) leaves unset. */
export function operatorFilledFelixFields(expected: KubeObject, live: KubeObject, calicoVersion: string | undefined): string[] {
  if (live.kind !== 'FelixConfiguration' || live.metadata.name !== 'default' || !live.spec) return [];
  return felixFieldsFilledBy(calicoVersion).filter((f) => expected.spec?.[f] === undefined && live.spec![f] !== undefined);
}
