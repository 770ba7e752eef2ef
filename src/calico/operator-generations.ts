/**
 * What each tigera-operator generation (one per Calico minor) writes into the cluster on its own: the finalizers it
 * puts on Installation `default`, the TigeraStatus objects it reports in, and the FelixConfiguration fields it fills
 * in. Read in the operator sources; see docs/calico-differences.md "What each operator generation writes".
 */
import type { KubeObject } from '../kube/types.js';
import { compareVersions } from './knowledge.js';

/**
 * What an operator generation leaves on the cluster that an older operator does not know and so never clears
 * (read in tigera/operator v1.32.10 and v1.34.3: pkg/render/finalizers.go, the apiserver and installation
 * controllers, the ippool controller's status name). After an in-place downgrade below `since`, the newer
 * operator's Installation finalizers would make every later `kubectl delete installation default` hang, and its
 * TigeraStatus objects would keep saying whatever it last wrote (e.g. `ippools` Degraded) for ever.
 */
export const OPERATOR_LEFTOVERS: { since: string; installationFinalizers: string[]; tigeraStatuses: string[] }[] = [
  {
    since: 'v3.28',
    installationFinalizers: ['operator.tigera.io/installation-controller', 'operator.tigera.io/apiserver-controller'],
    tigeraStatuses: ['ippools'],
  },
];

/** The newer operators' finalizers and TigeraStatus names an operator of Calico `target` does not handle. */
export function leftoversUnknownTo(target: string): { installationFinalizers: string[]; tigeraStatuses: string[] } {
  const newer = OPERATOR_LEFTOVERS.filter((r) => compareVersions(target, `${r.since}.0`) < 0);
  return { installationFinalizers: newer.flatMap((r) => r.installationFinalizers), tigeraStatuses: newer.flatMap((r) => r.tigeraStatuses) };
}

/**
 * Fields of FelixConfiguration `default` that the tigera operator fills in when they are unset (read in
 * tigera/operator v1.34.3 `pkg/controller/installation/core_controller.go` setDefaultsOnFelixConfiguration and
 * `bpf.go`; seen live: v1.34.3 writes `bpfEnabled: false` within seconds of starting). A value the operator writes
 * where the bundle has none is the target version's default, not a change to the user's data.
 */
export const OPERATOR_FILLED_FELIX_FIELDS = ['bpfEnabled', 'bpfHostConntrackBypass', 'healthPort', 'vxlanVNI', 'routeTableRange'] as const;

/** The OPERATOR_FILLED_FELIX_FIELDS the live FelixConfiguration `default` has and the bundle's (`expected`) leaves unset. */
export function operatorFilledFelixFields(expected: KubeObject, live: KubeObject): string[] {
  if (live.kind !== 'FelixConfiguration' || live.metadata.name !== 'default' || !live.spec) return [];
  return OPERATOR_FILLED_FELIX_FIELDS.filter((f) => expected.spec?.[f] === undefined && live.spec![f] !== undefined);
}
