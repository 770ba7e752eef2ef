/**
 * Helm's release records are Helm's: a backup of a Helm-installed tigera-operator, restored after `helm upgrade`,
 * must leave helm history, status and the record objects exactly as Helm has them. The real `helm` (4 and 3,
 * test/helm/build.sh) installs Calico v3.28.1's tigera-operator chart (test/helm/chart.sh); the real CLI exports and
 * restores. A bundle written before export left the records out (one that carries them) is made by adding the
 * records, as export read them then, to a copy of a bundle. Without the rule, restore wrote revision 1 back as
 * `deployed` beside revision 2, and after `helm uninstall` it brought back a release Helm no longer had.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configPathFor } from '../../src/bundle/paths.js';
import { dumpYaml } from '../../src/bundle/writer.js';
import { K } from '../../src/kube/builtin.js';
import type { KubeClient } from '../../src/kube/client.js';
import { resourceKey, type KubeObject } from '../../src/kube/types.js';
import { buildHelm, helm, installOperatorChart, tigeraOperatorChart, type HelmResult } from '../support/helm.js';
import { explain, kubeconfig, resetCalico, runCli, testClient } from './helpers.js';

const NS = 'tigera-operator';
const RELEASE = 'calico';
const ok = (r: HelmResult, what: string) => expect(r.code, `${what}: ${r.stderr.slice(-2000)}`).toBe(0);

/**
 * A copy of the bundle at `from` with `records` added under config/ as an export before this rule wrote them (the
 * object as listed, without managedFields; a Secret's file 0600 and flagged secret), checksums and counts updated.
 */
function withRecords(from: string, to: string, records: KubeObject[]): string {
  fs.cpSync(from, to, { recursive: true });
  const m = JSON.parse(fs.readFileSync(path.join(to, 'manifest.json'), 'utf8'));
  for (const r of records) {
    const obj: KubeObject = { ...r, apiVersion: 'v1', metadata: { ...r.metadata } };
    delete obj.metadata.managedFields;
    const rel = configPathFor(obj);
    const text = dumpYaml(obj);
    const secret = obj.kind === 'Secret';
    fs.mkdirSync(path.dirname(path.join(to, rel)), { recursive: true });
    fs.writeFileSync(path.join(to, rel), text, { mode: secret ? 0o600 : 0o644 });
    m.files[rel] = { sha256: createHash('sha256').update(text).digest('hex'), size: Buffer.byteLength(text), ...(secret ? { secret: true } : {}) };
    const key = resourceKey(secret ? K.secret : K.configMap);
    m.counts[key] = (m.counts[key] ?? 0) + 1;
  }
  fs.writeFileSync(path.join(to, 'manifest.json'), JSON.stringify(m, null, 2));
  return to;
}

describe.each([4, 3] as const)('restore over a Helm-installed tigera-operator leaves Helm’s release records to Helm (Helm %i)', (major) => {
  let client: KubeClient;
  let helmBin: string;
  let chart: string;
  let home: string;
  let work: string;
  let driver: 'secret' | 'configmap' = 'secret';
  const h = (args: string[]) => helm(helmBin, kubeconfig(), home, args, driver);
  const recordType = () => (driver === 'secret' ? K.secret : K.configMap);
  const liveRecords = () => client.listAll(recordType(), { namespace: NS, labelSelector: `owner=helm,name=${RELEASE}` });
  /** Names only where a record may show up in a failure message: it holds the release's values. */
  const liveRecordNames = async () => (await liveRecords()).map((o) => o.metadata.name).sort();
  /** Each record as name, resourceVersion and Helm's status label: any write by restore changes the resourceVersion. */
  const records = async () => (await liveRecords()).map((s) => `${s.metadata.name}@${s.metadata.resourceVersion} ${s.metadata.labels?.status}`).sort();
  const history = async () => {
    const r = await h(['history', RELEASE, '-n', NS, '-o', 'json']);
    ok(r, 'helm history');
    return JSON.parse(r.stdout).map((x: any) => [x.revision, x.status]);
  };
  const helmStatus = async () => {
    const r = await h(['status', RELEASE, '-n', NS, '-o', 'json']);
    ok(r, 'helm status');
    const s = JSON.parse(r.stdout);
    return [s.version, s.info?.status];
  };
  const exportBundle = async (name: string) => {
    const out = path.join(work, name);
    const r = await runCli(['export', '--out', out]);
    expect(r.code, explain(r)).toBe(0);
    return out;
  };
  const restore = async (bundle: string) => {
    const r = await runCli(['restore', bundle, '--resources', '--yes']);
    expect(r.code, explain(r)).toBe(0);
    return r;
  };
  /** The files of a bundle that hold a Helm release record (by the name Helm gives them). */
  const recordFiles = (bundle: string) =>
    Object.keys(JSON.parse(fs.readFileSync(path.join(bundle, 'manifest.json'), 'utf8')).files).filter((f) => f.includes('sh.helm.release.v1'));
  const helmLines = (r: { stdout: string; stderr: string }) => `${r.stdout}\n${r.stderr}`.split('\n').filter((l) => /Helm release record/.test(l));

  let fresh: string;
  let old: string;

  beforeAll(async () => {
    client = await testClient();
    await resetCalico(client);
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-helm-restore-'));
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-helm-bundles-'));
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

  it('export leaves the release records out and notes the revision deployed at export', async () => {
    const atExport = await liveRecords();
    expect(atExport.map((s) => s.metadata.name)).toEqual([`sh.helm.release.v1.${RELEASE}.v1`]);
    fresh = await exportBundle('revision-1');
    old = withRecords(fresh, path.join(work, 'revision-1-with-records'), atExport);
    expect(recordFiles(fresh)).toEqual([]);
    const inspect = await runCli(['inspect', fresh]);
    expect(inspect.code, explain(inspect)).toBe(0);
    expect(inspect.stdout).toMatch(/^Note {8}Helm release tigera-operator\/calico: revision 1 deployed at export; its 1 release record\(s\) left out/m);
  });

  it('after helm upgrade, restoring that bundle leaves history, status and the records exactly Helm’s', async () => {
    ok(await h(['upgrade', RELEASE, chart, '-n', NS, '--reuse-values']), 'helm upgrade');
    const before = await records();
    expect(before).toHaveLength(2);
    const r = await restore(fresh);
    expect(helmLines(r)).toEqual([]);
    expect(await records()).toEqual(before);
    expect(await history()).toEqual([
      [1, 'superseded'],
      [2, 'deployed'],
    ]);
    expect(await helmStatus()).toEqual([2, 'deployed']);
    // Helm's new revision is no drift of Calico's: diff reports nothing of the records either.
    const diff = await runCli(['diff', fresh, '-o', 'json']);
    expect(diff.code, explain(diff)).toBe(0);
    expect(diff.stdout).not.toContain('sh.helm.release');
  });

  it('a bundle that carries the records (written before this rule) has them left to Helm, said in one line', async () => {
    expect(recordFiles(old)).toEqual([`config/${NS}/Secret/sh.helm.release.v1.${RELEASE}.v1.yaml`]);
    const before = await records();
    const r = await restore(old);
    expect(await records()).toEqual(before);
    expect(await history()).toEqual([
      [1, 'superseded'],
      [2, 'deployed'],
    ]);
    expect(await helmStatus()).toEqual([2, 'deployed']);
    expect(helmLines(r)).toEqual([
      `left 1 Helm release record of the bundle to Helm (tigera-operator/calico revision 1, deployed then): restore never writes Helm's records; to return to the revision deployed then: helm rollback calico 1 -n tigera-operator`,
    ]);
  });

  it('after helm uninstall, restoring that bundle brings back no release', async () => {
    ok(await h(['uninstall', RELEASE, '-n', NS, '--no-hooks']), 'helm uninstall');
    expect(await liveRecordNames()).toEqual([]);
    await restore(old);
    expect(await liveRecordNames()).toEqual([]);
    // Helm v4 lists releases in every status by default.
    const list = await h(['list', '-n', NS, '-o', 'json']);
    ok(list, 'helm list');
    expect(JSON.parse(list.stdout)).toEqual([]);
  });

  it('a release Helm keeps in ConfigMaps (HELM_DRIVER=configmap): the same', async () => {
    driver = 'configmap';
    ok(
      await h(['install', RELEASE, chart, '-n', NS, '--set', 'installation.enabled=false', '--set', 'apiServer.enabled=false']),
      'helm install (configmap driver)',
    );
    const atExport = await liveRecords();
    expect(atExport.map((c) => c.metadata.name)).toEqual([`sh.helm.release.v1.${RELEASE}.v1`]);
    const bundle = await exportBundle('configmap-revision-1');
    expect(recordFiles(bundle)).toEqual([]);
    const carrying = withRecords(bundle, path.join(work, 'configmap-revision-1-with-records'), atExport);
    expect(recordFiles(carrying)).toEqual([`config/${NS}/ConfigMap/sh.helm.release.v1.${RELEASE}.v1.yaml`]);
    ok(await h(['upgrade', RELEASE, chart, '-n', NS, '--reuse-values']), 'helm upgrade (configmap driver)');
    const before = await records();
    expect(before).toHaveLength(2);
    const r = await restore(carrying);
    expect(await records()).toEqual(before);
    expect(await history()).toEqual([
      [1, 'superseded'],
      [2, 'deployed'],
    ]);
    expect(helmLines(r)).toHaveLength(1);
  });
});
