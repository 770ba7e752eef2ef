/**
 * Calico 3.32's v3-CRD mode: the projectcalico.org/v3 kinds served by native CRDs (`ippools.projectcalico.org`, ...)
 * instead of by the aggregated Calico API server over crd.projectcalico.org/v1 storage. A new 3.32 install may use
 * it (calico v3.32.1 manifests/v3_projectcalico_org.yaml, calico-v3-crds.yaml), and the DatastoreMigration
 * controller of kube-controllers (CRD `datastoremigrations.migration.projectcalico.org`) moves an existing cluster
 * into it. cni-rewind reads and writes the v1 storage only: in this mode an export holds no Calico data, and a
 * restore would create the v1 CRDs again, which flips the operator back to v1 mode over stale data. So every
 * command that exports or writes refuses first, by name.
 */
import { RefusedError } from '../core/errors.js';
import { CALICO_CRD_GROUP, CALICO_V3_GROUP } from './knowledge.js';

/** The group of the DatastoreMigration kind (v1 -> v3 CRD migration, kube-controllers' migration controller). */
export const DATASTORE_MIGRATION_GROUP = `migration.${CALICO_V3_GROUP}`;

export interface V3CrdMode {
  /** Names of the CRDs of group projectcalico.org, sorted. */
  crds: string[];
  /** The DatastoreMigration CRD is installed (a v1 -> v3 migration may be under way or done). */
  datastoreMigration: boolean;
}

/** v3-CRD mode from the cluster's CRD names (`<plural>.<group>`); undefined when no projectcalico.org CRD exists. */
export function v3CrdModeOf(crdNames: readonly string[]): V3CrdMode | undefined {
  // A CRD's name is <plural>.<group>: the group is everything after the first dot.
  const groupOfName = (n: string) => n.slice(n.indexOf('.') + 1);
  const crds = crdNames.filter((n) => groupOfName(n) === CALICO_V3_GROUP).sort();
  if (!crds.length) return undefined;
  return { crds, datastoreMigration: crdNames.some((n) => groupOfName(n) === DATASTORE_MIGRATION_GROUP) };
}

/** One line: what was found, that it is not supported, and what to do instead. */
export function v3CrdModeRefusal(mode: V3CrdMode, what: string): RefusedError {
  const example = mode.crds.includes(`ippools.${CALICO_V3_GROUP}`) ? `ippools.${CALICO_V3_GROUP}` : mode.crds[0];
  const migration = mode.datastoreMigration ? ' and the DatastoreMigration CRD' : '';
  return new RefusedError(
    `Calico's v3-CRD mode found (${mode.crds.length} CRDs of group ${CALICO_V3_GROUP}, e.g. ${example}${migration}): cni-rewind does not support it yet, so ${what}`,
    {
      hint: `back up with kubectl (kubectl get ${example} -o yaml, and each other ${CALICO_V3_GROUP} kind) and your provider's disk snapshots instead; cni-rewind supports Calico whose data is in ${CALICO_CRD_GROUP}, as the operator-crds.yaml and calico.yaml of every release up to 3.32 install it`,
    },
  );
}
