/**
 * `wrap` around `helm upgrade` of a Helm-installed tigera-operator (issue 31, src/apply/wrap-helm.ts), with the real
 * `helm` 4 and 3 (test/helm/build.sh) and Calico v3.28.1's chart (test/helm/chart.sh). When the wrapped command made a new
 * revision and fails, wrap rolls the release back to the revision deployed before it, then restores the resources:
 * `helm history` ends with that revision's chart deployed and the objects are its. Without --restore-on-failure the
 * rollback is the first recovery command. A command that leaves Helm's history alone is not rolled back.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { helmEnv } from '../../src/dev/local-cluster/calico-helm.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { KubeObject } from '../../src/kube/types.js';
import { buildHelm, helm, installOperatorChart, tigeraOperatorChart, type HelmResult } from '../support/helm.js';
import { explain, kubeconfig, resetCalico, runCli, testClient } from './helpers.js';

const NS = 'tigera-operator';
const RELEASE = 'calico';
const MIRROR = 'registry.example.internal';

describe.each([4, 3] as const)('wrap around helm upgrade keeps the Helm release and the cluster consistent (Helm %i)', (major) => {
  let client: KubeClient;
  let helmBin: string;
  let chart: string;
  let home: string;
  let work: string;
  const h = (args: string[]) => helm(helmBin, kubeconfig(), home, args);
  const ok = (r: HelmResult, what: string) => expect(r.code, `${what}: ${r.stderr.slice(-2000)}`).toBe(0);
  const history = async () => {
    const r = await h(['history', RELEASE, '-n', NS, '-o', 'json']);
    ok(r, 'helm history');
    return JSON.parse(r.stdout).map((x: any) => [x.revision, x.status, x.description]);
  };
  const values = async () => {
    const r = await h(['get', 'values', RELEASE, '-n', NS, '-o', 'json']);
    ok(r, 'helm get values');
    return JSON.parse(r.stdout);
  };
  const operatorImage = async () => (await client.get<KubeObject>(K.deployment, NS, 'tigera-operator')).spec!.template.spec.containers[0].image as string;
  /** wrap, with helm's own folders for both the wrapped helm and wrap's rollback. */
  const wrap = (flags: string[], script: string) =>
    runCli(['wrap', ...flags, '--helm', helmBin, '--out', path.join(work, `b-${Date.now()}`), '-o', 'json', '--', 'sh', '-c', script], {
      env: { ...(helmEnv(kubeconfig(), home) as Record<string, string>) },
      timeoutMs: 900_000,
    });
  const upgradeThenFail = () => `"${helmBin}" upgrade ${RELEASE} "${chart}" -n ${NS} --reuse-values --set tigeraOperator.registry=${MIRROR} >&2 && exit 3`;

  beforeAll(async () => {
    client = await testClient();
    await resetCalico(client);
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-wrap-helm-'));
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-wrap-helm-bundles-'));
    helmBin = await buildHelm(major);
    chart = await tigeraOperatorChart('v3.28.1');
    await installOperatorChart(h, RELEASE, NS, chart);
  }, 25 * 60_000);

  afterAll(async () => {
    if (helmBin && client) await h(['uninstall', RELEASE, '-n', NS, '--no-hooks']);
    if (client) await resetCalico(client);
    client?.close();
    for (const d of [home, work]) if (d) fs.rmSync(d, { recursive: true, force: true });
  });

  it('--restore-on-failure: the upgrade that failed its script is rolled back to revision 1 first, then the resources restored', async () => {
    const imageBefore = await operatorImage();
    const valuesBefore = await values();
    expect(imageBefore).not.toContain(MIRROR);

    const r = await wrap(['--restore-on-failure'], upgradeThenFail());
    expect(r.code, explain(r)).toBe(3);
    const result = JSON.parse(r.stdout);
    expect(result.helm).toEqual({
      release: RELEASE,
      namespace: NS,
      revisionBefore: 1,
      newestAfter: 2,
      rollback: `helm rollback ${RELEASE} 1 -n ${NS}`,
      rolledBack: true,
    });
    expect(result.restored).toMatchObject({ ok: true, failures: [] });
    expect(result.recovery).toEqual([]);
    expect(r.stderr).toContain(`the command made revision 2 of Helm release ${NS}/${RELEASE}: helm rollback ${RELEASE} 1 -n ${NS}`);
    expect(await history()).toEqual([
      [1, 'superseded', 'Install complete'],
      [2, 'superseded', 'Upgrade complete'],
      [3, 'deployed', 'Rollback to 1'],
    ]);
    expect(await values()).toEqual(valuesBefore);
    expect(await operatorImage()).toBe(imageBefore);
  }, 900_000);

  it('without it: the rollback is the first recovery command, and the release is left as the command made it', async () => {
    const r = await wrap([], upgradeThenFail());
    expect(r.code, explain(r)).toBe(3);
    const result = JSON.parse(r.stdout);
    expect(result.helm).toEqual({ release: RELEASE, namespace: NS, revisionBefore: 3, newestAfter: 4, rollback: `helm rollback ${RELEASE} 3 -n ${NS}` });
    expect(result.restored).toBeUndefined();
    expect(result.recovery).toEqual([`helm rollback ${RELEASE} 3 -n ${NS}`, `cni-rewind restore ${result.bundle.path} --resources`]);
    expect((await history()).at(-1)).toEqual([4, 'deployed', 'Upgrade complete']);
    expect(await operatorImage()).toContain(MIRROR);

    // The table says why the rollback goes first.
    const table = await runCli(['wrap', '--out', path.join(work, 'table'), '--', 'sh', '-c', upgradeThenFail()], {
      env: { ...(helmEnv(kubeconfig(), home) as Record<string, string>) },
      timeoutMs: 900_000,
    });
    expect(table.code, explain(table)).toBe(3);
    expect(table.stdout).toContain(`helm     the command made revision 5 of release ${NS}/${RELEASE} (revision 4 was deployed before)`);
    expect(table.stdout).toContain('the Helm release goes back before its objects are restored; recover with:');
    expect(table.stdout).toContain(`  1. helm rollback ${RELEASE} 4 -n ${NS}`);
  }, 900_000);

  it('a failing command that leaves Helm’s history alone: no rollback, the restore only', async () => {
    const before = await history();
    const r = await wrap(['--restore-on-failure'], 'exit 4');
    expect(r.code, explain(r)).toBe(4);
    const result = JSON.parse(r.stdout);
    expect(result.helm).toBeUndefined();
    expect(result.restored).toMatchObject({ ok: true });
    expect(await history()).toEqual(before);
  }, 900_000);
});
