/**
 * Calico 3.32's v3-CRD mode (issue 30): the projectcalico.org kinds as native CRDs. The CRDs below carry the names,
 * group, kinds and scope of calico v3.32.1's manifests/v3_projectcalico_org.yaml and of kube-controllers'
 * DatastoreMigration CRD, with an open schema: cni-rewind tells the mode by CRD names, and the project does not
 * ship those manifests. On a cluster without Calico's programs, once they exist every command that exports or
 * writes refuses by name with exit 5 and writes nothing; doctor reports the mode instead of calico-crds-missing.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject } from '../../src/kube/types.js';
import { resetCalico, runCli, testClient } from './helpers.js';

const crd = (group: string, plural: string, kind: string, namespaced = false): KubeObject => ({
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: `${plural}.${group}` },
  spec: {
    group,
    names: { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase() },
    scope: namespaced ? 'Namespaced' : 'Cluster',
    versions: [
      {
        name: group === 'projectcalico.org' ? 'v3' : 'v1beta1',
        served: true,
        storage: true,
        schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
      },
    ],
  },
});
const V3_CRDS = [
  crd('projectcalico.org', 'ippools', 'IPPool'),
  crd('projectcalico.org', 'clusterinformations', 'ClusterInformation'),
  crd('projectcalico.org', 'felixconfigurations', 'FelixConfiguration'),
  crd('projectcalico.org', 'networkpolicies', 'NetworkPolicy', true),
  crd('migration.projectcalico.org', 'datastoremigrations', 'DatastoreMigration'),
];
const REFUSAL =
  /^cni-rewind: Calico's v3-CRD mode found \(4 CRDs of group projectcalico\.org, e\.g\. ippools\.projectcalico\.org and the DatastoreMigration CRD\): cni-rewind does not support it yet, so /m;

describe("Calico 3.32's v3-CRD mode is refused by name", () => {
  let client: KubeClient;
  let work: string;
  let bundle: string;

  beforeAll(async () => {
    client = await testClient();
    await resetCalico(client);
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-v3crds-'));
    // A bundle from before the mode (no Calico yet): what a restore would be given.
    bundle = path.join(work, 'before');
    const r = await runCli(['export', '--out', bundle]);
    expect(r.code, r.stderr).toBe(0);
    for (const c of V3_CRDS) await client.create(K.crd, c);
    await client.waitFor(
      'the v3 CRDs to be Established',
      async () => {
        const all = await client.listAll(K.crd);
        return V3_CRDS.every((c) =>
          all.find((x) => x.metadata.name === c.metadata.name)?.status?.conditions?.some((x: any) => x.type === 'Established' && x.status === 'True'),
        )
          ? true
          : undefined;
      },
      { timeoutMs: 60_000 },
    );
  }, 300_000);
  afterAll(async () => {
    for (const c of V3_CRDS) await client.delete(K.crd, undefined, c.metadata.name).catch(() => undefined);
  });

  it('export, backup, plan and restore (also --dry-run) refuse with exit 5 and write nothing', async () => {
    const crdsBefore = (await client.listMetadata(K.crd)).map((c) => c.metadata.name).sort();
    const cases: [string[], string][] = [
      [['export', '--out', path.join(work, 'export')], 'nothing was exported'],
      [['backup', '--out', path.join(work, 'backup')], 'nothing was backed up'],
      [['plan', '--to', '3.32.1', '--bundle', bundle, '--no-disk-snapshots', '--out', path.join(work, 'plan.json')], 'no plan was made'],
      [['restore', bundle, '--resources', '--yes'], 'nothing was restored'],
      [['restore', bundle, '--resources', '--dry-run'], 'nothing was restored'],
    ];
    for (const [args, what] of cases) {
      const r = await runCli(args);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(5);
      expect(r.stderr).toMatch(REFUSAL);
      expect(r.stderr).toContain(what);
      expect(r.stderr).not.toMatch(/\n\s+at /);
    }
    expect(fs.existsSync(path.join(work, 'export'))).toBe(false);
    expect(fs.existsSync(path.join(work, 'backup'))).toBe(false);
    expect(fs.existsSync(path.join(work, 'plan.json'))).toBe(false);
    // No v1 CRD created by the restore: the operator would go back to v1 mode over stale data.
    expect((await client.listMetadata(K.crd)).map((c) => c.metadata.name).sort()).toEqual(crdsBefore);
  });

  it('doctor reports calico-v3-crd-mode (a warning, exit 1), not calico-crds-missing', async () => {
    const r = await runCli(['doctor', '-o', 'json']);
    expect(r.code, r.stderr).toBe(1);
    const ids = JSON.parse(r.stdout).findings.map((f: any) => f.id);
    expect(ids).toContain('calico-v3-crd-mode');
    expect(ids).not.toContain('calico-crds-missing');
  });
});
