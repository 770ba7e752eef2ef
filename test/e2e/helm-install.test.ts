/**
 * A Calico installed the way Calico's docs put first (issue 31, item 2): the real `helm` program (test/helm/build.sh)
 * installs the tigera-operator chart of Calico v3.28.1, packaged from the release's own source tree as Calico
 * releases it (test/helm/chart.sh). `cni-rewind status` reads Helm's own record of the release (the deployed
 * revision's sh.helm.release.v1 Secret) and shows chart, revision and the names of the values the user set, never a
 * value; after it ran, helm's history and values are untouched. The operator Deployment is not run here (the local
 * cluster runs operators only when a test starts Calico's supervisor): detection needs only the objects.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import { buildHelm, helm, installOperatorChart, tigeraOperatorChart, type HelmResult } from '../support/helm.js';
import { explain, kubeconfig, resetCalico, runCli, testClient } from './helpers.js';

const NS = 'tigera-operator';
const RELEASE = 'calico';
/** A pull-secret token given to the chart: status may name the value's key, never show this. */
const PULL_SECRET_TOKEN = 'helm-e2e-pull-secret-do-not-print';
/** The chart makes a kubernetes.io/dockerconfigjson-shaped Secret of it: the value must be that JSON. */
const PULL_SECRET_VALUE = JSON.stringify({ auths: { 'registry.invalid': { auth: PULL_SECRET_TOKEN } } });

const ok = (r: HelmResult, what: string) => expect(r.code, `${what}: ${r.stderr.slice(-2000)}`).toBe(0);

describe('a tigera-operator installed by the real helm', () => {
  let client: KubeClient;
  let helmBin: string;
  let chart: string;
  let home: string;
  /** Where helm keeps the release (HELM_DRIVER): Secrets, its default, until the last test. */
  let driver: 'secret' | 'configmap' = 'secret';
  const h = (args: string[]) => helm(helmBin, kubeconfig(), home, args, driver);
  const helmRecords = async () =>
    (await client.listAll(K.secret, { namespace: NS, labelSelector: `owner=helm,name=${RELEASE}` }))
      .map((s) => `${s.metadata.name}@${s.metadata.resourceVersion} ${s.metadata.labels?.status}`)
      .sort();
  const statusJson = async () => {
    const r = await runCli(['status', '-o', 'json']);
    expect(r.code, explain(r)).toBe(0);
    return { text: r.stdout, calico: JSON.parse(r.stdout).calico };
  };

  beforeAll(async () => {
    client = await testClient();
    await resetCalico(client);
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-helm-'));
    helmBin = await buildHelm();
    chart = await tigeraOperatorChart('v3.28.1');
    await installOperatorChart(h, RELEASE, NS, chart);
  }, 25 * 60_000);

  afterAll(async () => {
    // --no-hooks: the chart's pre-delete hook is a Job running the operator's clean-up, which no kwok pod runs.
    if (helmBin && client) ok(await h(['uninstall', RELEASE, '-n', NS, '--no-hooks']), 'helm uninstall');
    if (client) await resetCalico(client);
    client?.close();
    if (home) fs.rmSync(home, { recursive: true, force: true });
  });

  it('status shows the release from Helm’s record: chart v3.28.1, revision 1, deployed, the value names', async () => {
    const { calico } = await statusJson();
    expect(calico.installType).toBe('operator');
    expect(calico.method.method).toBe('operator-helm');
    expect(calico.method.helm).toEqual({
      release: RELEASE,
      namespace: NS,
      record: `sh.helm.release.v1.${RELEASE}.v1`,
      chart: { name: 'tigera-operator', version: 'v3.28.1', appVersion: 'v3.28.1' },
      revision: 1,
      status: 'deployed',
      valueKeys: ['apiServer', 'installation'],
    });
  });

  it('after helm upgrade: revision 2, the new value named but not shown, and helm history/get values as before', async () => {
    // As the chart's values.yaml shows it: --set-file imagePullSecrets.<name>=./pull-secret.json
    const pullSecretFile = path.join(home, 'pull-secret.json');
    fs.writeFileSync(pullSecretFile, PULL_SECRET_VALUE);
    ok(await h(['upgrade', RELEASE, chart, '-n', NS, '--reuse-values', '--set-file', `imagePullSecrets.e2e-registry=${pullSecretFile}`]), 'helm upgrade');
    const before = await helmRecords();
    expect(before).toHaveLength(2);

    const { calico, text } = await statusJson();
    expect(calico.method.helm).toMatchObject({ record: `sh.helm.release.v1.${RELEASE}.v2`, revision: 2, status: 'deployed', chart: { version: 'v3.28.1' } });
    expect([...calico.method.helm.valueKeys].sort()).toEqual(['apiServer', 'imagePullSecrets', 'installation']);
    expect(text).not.toContain(PULL_SECRET_TOKEN);
    const human = await runCli(['status']);
    expect(human.code, explain(human)).toBe(0);
    expect(human.stdout).toMatch(/^Installed {3}tigera-operator by Helm \(release tigera-operator\/calico\)$/m);
    expect(human.stdout).toMatch(/^Helm {8}revision 2 \(deployed\), chart tigera-operator v3\.28\.1 \(app v3\.28\.1\), values set: /m);
    expect(human.stdout + human.stderr).not.toContain(PULL_SECRET_TOKEN);

    // cni-rewind only read: Helm's records are the same objects, and helm itself reads them as before.
    expect(await helmRecords()).toEqual(before);
    const history = await h(['history', RELEASE, '-n', NS, '-o', 'json']);
    ok(history, 'helm history');
    expect(JSON.parse(history.stdout).map((r: any) => [r.revision, r.status, r.chart])).toEqual([
      [1, 'superseded', 'tigera-operator-v3.28.1'],
      [2, 'deployed', 'tigera-operator-v3.28.1'],
    ]);
    const values = await h(['get', 'values', RELEASE, '-n', NS, '-o', 'json']);
    ok(values, 'helm get values');
    expect(JSON.parse(values.stdout)).toEqual({
      apiServer: { enabled: false },
      installation: { enabled: false },
      imagePullSecrets: { 'e2e-registry': PULL_SECRET_VALUE },
    });
  });

  it('a record status cannot decode is one line, and status goes on', async () => {
    // The deployed record replaced by bytes that are not Helm's encoding (what a damaged or foreign Secret holds).
    const name = `sh.helm.release.v1.${RELEASE}.v2`;
    const rec = await client.get(K.secret, NS, name);
    await client.replace(K.secret, { ...rec, data: { release: Buffer.from('not a release').toString('base64') } });
    const human = await runCli(['status']);
    expect(human.code, explain(human)).toBe(0);
    expect(human.stdout).toMatch(
      new RegExp(`^Helm        release record not read: Secret ${NS}/${name.replace(/\./g, '\\.')}: the record is not Helm release JSON$`, 'm'),
    );
    expect(human.stdout).toMatch(/^Operator {4}quay\.io\/tigera\/operator:v1\.34\.3 /m);
    await client.replace(K.secret, { ...(await client.get(K.secret, NS, name)), data: rec.data });
  });

  it('after a failed helm upgrade: status names the revision still deployed, as helm history does', async () => {
    // A pull secret that is not dockerconfigjson: the API server refuses the chart's Secret, helm marks revision 3 failed.
    const r = await h(['upgrade', RELEASE, chart, '-n', NS, '--reuse-values', '--set', 'imagePullSecrets.e2e-registry=not-json']);
    expect(r.code, r.stderr).not.toBe(0);
    const history = await h(['history', RELEASE, '-n', NS, '-o', 'json']);
    ok(history, 'helm history');
    const deployed = JSON.parse(history.stdout).filter((x: any) => x.status === 'deployed');
    expect(deployed.map((x: any) => x.revision)).toEqual([2]);
    const { calico } = await statusJson();
    expect(calico.method.helm).toMatchObject({ record: `sh.helm.release.v1.${RELEASE}.v2`, revision: 2, status: 'deployed' });
  });

  it('a user who may not list Secrets in the release namespace gets one line saying so, and the rest of status', async () => {
    const user = 'helm-e2e-no-secrets';
    const rbac = { apiGroup: 'rbac.authorization.k8s.io' };
    // Every read status makes except Secrets.
    await client.create(K.clusterRole, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: user },
      rules: [
        { apiGroups: [''], resources: ['nodes', 'namespaces', 'configmaps'], verbs: ['get', 'list'] },
        { apiGroups: ['apps'], resources: ['deployments', 'daemonsets'], verbs: ['get', 'list'] },
        { apiGroups: ['apiextensions.k8s.io'], resources: ['customresourcedefinitions'], verbs: ['get', 'list'] },
        { apiGroups: ['crd.projectcalico.org', 'operator.tigera.io'], resources: ['*'], verbs: ['get', 'list'] },
      ],
    });
    await client.create(K.clusterRoleBinding, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: user },
      roleRef: { ...rbac, kind: 'ClusterRole', name: user },
      subjects: [{ ...rbac, kind: 'User', name: user }],
    });
    try {
      const r = await runCli(['status', '--as', user]);
      expect(r.code, explain(r)).toBe(0);
      expect(r.stdout).toMatch(
        /^Helm {8}release record not read: listing Secrets in tigera-operator \(Helm's release records\) is forbidden for helm-e2e-no-secrets$/m,
      );
      expect(r.stdout).toMatch(/^Installed {3}tigera-operator by Helm \(release tigera-operator\/calico\)$/m);
    } finally {
      await client.delete(K.clusterRoleBinding, undefined, user);
      await client.delete(K.clusterRole, undefined, user);
    }
  });

  it('a release Helm keeps in ConfigMaps (HELM_DRIVER=configmap) is read from there', async () => {
    ok(await h(['uninstall', RELEASE, '-n', NS, '--no-hooks']), 'helm uninstall');
    driver = 'configmap';
    ok(await h(['install', RELEASE, chart, '-n', NS, '--set', 'installation.enabled=false']), 'helm install (configmap driver)');
    expect(await client.listAll(K.secret, { namespace: NS, labelSelector: `owner=helm,name=${RELEASE}` })).toEqual([]);
    const { calico } = await statusJson();
    expect(calico.method.helm).toMatchObject({
      record: `ConfigMap/sh.helm.release.v1.${RELEASE}.v1`,
      chart: { name: 'tigera-operator', version: 'v3.28.1' },
      revision: 1,
      status: 'deployed',
      valueKeys: ['installation'],
    });
  });
});
