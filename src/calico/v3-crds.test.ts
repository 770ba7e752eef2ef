/**
 * Calico 3.32's v3-CRD mode. The CRD names below are those of calico v3.32.1's manifests/v3_projectcalico_org.yaml
 * (the operator install in v3-CRD mode) and kube-controllers/pkg/controllers/migration/crd (DatastoreMigration);
 * the project does not ship those manifests (calico-releases/ holds the default, v1-storage ones), so the names
 * are written out here.
 */
import { describe, expect, it } from 'vitest';
import { isErrorKind } from '../core/errors.js';
import { loadRelease } from './release.js';
import { v3CrdModeOf, v3CrdModeRefusal } from './v3-crds.js';

const V3_PLURALS = [
  'bgpconfigurations',
  'bgpfilters',
  'bgppeers',
  'blockaffinities',
  'caliconodestatuses',
  'clusterinformations',
  'felixconfigurations',
  'globalnetworkpolicies',
  'globalnetworksets',
  'hostendpoints',
  'ipamblocks',
  'ipamconfigurations',
  'ipamhandles',
  'ippools',
  'ipreservations',
  'kubecontrollersconfigurations',
  'networkpolicies',
  'networksets',
  'stagedglobalnetworkpolicies',
  'stagedkubernetesnetworkpolicies',
  'stagednetworkpolicies',
  'tiers',
];
const OPERATOR_CRDS = [
  'apiservers',
  'gatewayapis',
  'goldmanes',
  'imagesets',
  'installations',
  'istios',
  'managementclusterconnections',
  'tigerastatuses',
  'whiskers',
].map((p) => `${p}.operator.tigera.io`);
const V3_MODE_CRDS = [...V3_PLURALS.map((p) => `${p}.projectcalico.org`), ...OPERATOR_CRDS];
const MIGRATION_CRD = 'datastoremigrations.migration.projectcalico.org';

describe("Calico 3.32's v3-CRD mode", () => {
  it('is found from the CRD names of a v3-CRD install, with or without the DatastoreMigration CRD', () => {
    const mode = v3CrdModeOf(V3_MODE_CRDS);
    expect(mode?.crds).toHaveLength(22);
    expect(mode?.crds).toContain('ippools.projectcalico.org');
    expect(mode?.datastoreMigration).toBe(false);
    expect(v3CrdModeOf([...V3_MODE_CRDS, MIGRATION_CRD])?.datastoreMigration).toBe(true);
  });

  it('is not found in the CRDs of a release as cni-rewind ships it (3.32.1 and 3.28.1: crd.projectcalico.org storage)', async () => {
    for (const v of ['3.32.1', '3.28.1']) {
      const release = await loadRelease(v, { need: 'operator' });
      const names = release.crds.map((c) => c.metadata.name);
      expect(names).toContain('ippools.crd.projectcalico.org');
      expect(v3CrdModeOf(names)).toBeUndefined();
    }
  });

  it('refuses with exit 5 in one line naming what was found and what is not supported', () => {
    const err = v3CrdModeRefusal(v3CrdModeOf([...V3_MODE_CRDS, MIGRATION_CRD])!, 'nothing was exported');
    expect(isErrorKind(err, 'refused')).toBe(true);
    expect(err.message).toBe(
      "Calico's v3-CRD mode found (22 CRDs of group projectcalico.org, e.g. ippools.projectcalico.org and the DatastoreMigration CRD): cni-rewind does not support it yet, so nothing was exported",
    );
    expect(err.message).not.toContain('\n');
    expect(err.hint).toMatch(/kubectl get ippools\.projectcalico\.org -o yaml/);
  });
});
