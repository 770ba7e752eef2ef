/**
 * The Helm strategy's apply side (plan/helm-strategy.ts): before anything is written, the helm program is resolved
 * from this run's command line or PATH (never from the plan file), the release is checked against the cluster's
 * Helm record, and the chart against the plan; then the steps run helm. Each step is idempotent: one that finds
 * Helm's newest deployed revision already at the target chart, made after the plan's, reports it done.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { CalicoObjects } from '../calico/calico-objects.js';
import { INSTALLATION_TYPE, installMethod } from '../calico/install-method.js';
import { EnvironmentError, RefusedError } from '../core/errors.js';
import type { KubeClient } from '../kube/client.js';
import type { KubeObject } from '../kube/types.js';
import { chartFileSha256, checkChart, runHelm, type HelmTarget } from '../plan/helm-cli.js';
import { DEFAULT_HELM_CHART, isLocalChart, resolveHelmBinary } from '../plan/helm-strategy.js';
import { editHelmValues, editsPools, HELM_POOLS_PATH } from '../plan/helm-values.js';
import type { HelmStrategy, Plan } from '../plan/types.js';
import { TIGERA_STATUS } from './wait-rollout.js';

/** What the apply command line says about helm and the cluster helm must reach. */
export interface HelmGiven {
  helm?: string;
  helmChart?: string;
  kubeconfig?: string;
  context?: string;
  as?: string;
  asGroups?: string[];
}

/** The helm run apply's Helm steps use: resolved and checked by prepareHelm. */
export interface HelmRun extends HelmTarget {
  strategy: HelmStrategy;
  target: string;
}

const refuse = (what: string, hint = 'make a new plan with `cni-rewind plan`') => new RefusedError(`the plan cannot be applied: ${what}`, { hint });

/**
 * Refuses (exit 5) before the journal or lock exist: a Helm install planned without the Helm strategy (or the
 * other way round), another release than the cluster's, a chart that is not the planned one, no helm program.
 */
export async function prepareHelm(calico: CalicoObjects, plan: Plan, given: HelmGiven): Promise<HelmRun | undefined> {
  // The release from the operator Deployment apply read at its start (its Helm annotations), not a second read.
  const live = installMethod({ ...calico, calicoNode: calico.calicoNodeSystem ?? calico.calicoNodeKube });
  const liveHelm = live.method === 'operator-helm' ? live.helm : undefined;
  const h = plan.helm;
  if (!h) {
    // Resuming a Helm plan's run finds the release either way; a plan without the strategy must not touch a release.
    if (liveHelm) throw refuse(`the tigera-operator is Helm release ${liveHelm.namespace}/${liveHelm.release}, and this plan does not change it with helm`);
    return undefined;
  }
  if (!liveHelm || liveHelm.release !== h.release || liveHelm.namespace !== h.namespace) {
    throw refuse(
      `the plan changes Helm release ${h.namespace}/${h.release}, but the cluster's tigera-operator is ${liveHelm ? `release ${liveHelm.namespace}/${liveHelm.release}` : 'not installed by Helm'}`,
    );
  }
  if (!['upgrade', 'rollback'].includes(h.action)) throw refuse(`its Helm action ${JSON.stringify(h.action)} is not upgrade or rollback`);
  if (h.action === 'rollback' && !Number.isSafeInteger(h.rollbackRevision)) throw refuse('its Helm rollback has no revision');
  const bin = resolveHelmBinary(given.helm, 'the plan was not applied');
  const run: HelmRun = {
    bin,
    kubeArgs: helmKubeArgs(given),
    storage: h.storage === 'configmap' ? 'configmap' : 'secret',
    strategy: h,
    target: plan.target.version,
  };
  if (h.action === 'upgrade') {
    // The chart runs as code in the cluster (its templates): taken from this command line, the plan's only checked.
    const chart = given.helmChart ?? DEFAULT_HELM_CHART;
    if (chart !== h.chart)
      throw refuse(`it upgrades with chart ${h.chart}, and this apply command line gives ${chart}`, `if you trust it, rerun with --helm-chart ${h.chart}`);
    if (h.chartSha256 && chartFileSha256(chart) !== h.chartSha256) throw refuse(`the chart ${chart} changed since the plan was made`);
    await checkChart(run, chart, plan.target.version);
    // The plan's pool edits must fit the release's values now, or the run stops before anything is written.
    await upgradeValues(undefined, run, plan, calico.installation);
  }
  return run;
}

interface HistoryEntry {
  revision: number;
  status: string;
  chart: string;
}

async function history(run: HelmRun): Promise<HistoryEntry[]> {
  const { release, namespace } = run.strategy;
  const out = await runHelm(run, ['history', release, '-n', namespace, '-o', 'json'], `helm history ${release}`);
  return (JSON.parse(out.stdout) as HistoryEntry[]).sort((a, b) => a.revision - b.revision);
}

/** The newest revision, when it is deployed with the target chart and newer than the plan's: the step's work is done. */
async function alreadyDone(run: HelmRun): Promise<HistoryEntry | undefined> {
  const last = (await history(run)).pop();
  if (last && /^pending-/.test(last.status)) {
    throw new EnvironmentError(
      `Helm release ${run.strategy.namespace}/${run.strategy.release} is ${last.status} (revision ${last.revision}): an interrupted helm run`,
      {
        hint: `see \`helm history ${run.strategy.release} -n ${run.strategy.namespace}\`; settle it with helm rollback, then run apply --resume`,
      },
    );
  }
  const done = last?.status === 'deployed' && last.revision > run.strategy.currentRevision && last.chart.endsWith(`-${run.target}`);
  return done ? last : undefined;
}

async function settled(client: KubeClient, run: HelmRun, what: string): Promise<string> {
  const last = await alreadyDone(run);
  if (!last) {
    const newest = (await history(run)).pop();
    throw new EnvironmentError(
      `after ${what}, Helm's newest revision is ${newest ? `${newest.revision} ${newest.status} ${newest.chart}` : 'missing'}, not a deployed ${run.target} chart`,
    );
  }
  // The old operator's last TigeraStatus must not pass the rollout wait: the target operator writes its own.
  await client.delete(TIGERA_STATUS, undefined, 'calico');
  return `Helm release ${run.strategy.namespace}/${run.strategy.release} at revision ${last.revision} (${last.chart}, deployed)`;
}

/** Helm 4 applies server-side; the operator owns fields of the Installation the chart renders (its pools). */
export async function conflictArgs(target: HelmTarget): Promise<string[]> {
  const v = (await runHelm(target, ['version', '--template', '{{.Version}}'], 'helm version').catch(() => ({ stdout: '' }))).stdout.trim();
  return /^v?([4-9]|\d{2,})\./.test(v) ? ['--force-conflicts'] : [];
}

/** helm's flags for the cluster this run reaches, as its command line gave them. */
export function helmKubeArgs(given: HelmGiven): string[] {
  return [
    ...(given.kubeconfig ? ['--kubeconfig', given.kubeconfig] : []),
    ...(given.context ? ['--kube-context', given.context] : []),
    ...(given.as ? ['--kube-as-user', given.as] : []),
    ...(given.asGroups ?? []).flatMap((g) => ['--kube-as-group', g]),
  ];
}

/**
 * The values helm upgrade is given: the release's own (`helm get values`), with the plan's pool edits made the way
 * helm-values.ts says (the live Installation's entries when the values have none). Never printed nor logged.
 */
async function upgradeValues(client: KubeClient | undefined, run: HelmRun, plan: Plan, installation?: KubeObject): Promise<{ text: string; edits: string[] }> {
  const { release, namespace } = run.strategy;
  const got = await runHelm(run, ['get', 'values', release, '-n', namespace, '-o', 'json'], `helm get values ${release}`);
  const t = plan.transforms.installation;
  if (!editsPools(t)) return { text: got.stdout, edits: [] };
  let values: unknown;
  try {
    values = JSON.parse(got.stdout);
  } catch {
    throw new EnvironmentError(`helm get values ${release} did not print JSON`);
  }
  const inst = installation ?? (client ? await client.getOrUndefined(INSTALLATION_TYPE, undefined, 'default') : undefined);
  const edited = editHelmValues(values, inst, t)!;
  // JSON is YAML: helm reads it as a values file.
  return { text: `${JSON.stringify(edited.values, null, 2)}\n`, edits: edited.edits };
}

export async function helmUpgrade(client: KubeClient, run: HelmRun | undefined, plan: Plan): Promise<string> {
  if (!run || run.strategy.action !== 'upgrade' || !run.strategy.chart)
    throw new RefusedError('the plan has a helm-upgrade step but no Helm upgrade (plan.helm)');
  const done = await alreadyDone(run);
  if (done) return `already done: revision ${done.revision} (${done.chart})`;
  const { release, namespace, chart } = run.strategy as Required<Pick<HelmStrategy, 'release' | 'namespace' | 'chart'>>;
  // The release's values as the user set them (with the plan's pool edits), handed to helm as a private file and
  // removed: never shown. Computed again on a resumed run from the same release values: the same file.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cni-rewind-helm-'));
  let edits: string[];
  try {
    const values = await upgradeValues(client, run, plan);
    edits = values.edits;
    const file = path.join(dir, 'values.yaml');
    writeFileSync(file, values.text, { mode: 0o600 });
    const version = isLocalChart(chart) ? [] : ['--version', run.target];
    await runHelm(run, ['upgrade', release, chart, '-n', namespace, ...version, '-f', file, ...(await conflictArgs(run))], `helm upgrade ${release}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const carried = `the values of revision ${run.strategy.currentRevision} carried`;
  return `${await settled(client, run, 'helm upgrade')}, ${edits.length ? `${carried} with ${HELM_POOLS_PATH} edited (${edits.join('; ')})` : carried}`;
}

export async function helmRollback(client: KubeClient, run: HelmRun | undefined): Promise<string> {
  if (!run || run.strategy.action !== 'rollback' || run.strategy.rollbackRevision === undefined)
    throw new RefusedError('the plan has a helm-rollback step but no Helm rollback (plan.helm)');
  const done = await alreadyDone(run);
  if (done) return `already done: revision ${done.revision} (${done.chart})`;
  const { release, namespace, rollbackRevision } = run.strategy;
  // The revision must still be the target's chart in Helm's own history (a history trimmed by --history-max drops it).
  const back = (await history(run)).find((r) => r.revision === rollbackRevision);
  if (!back?.chart.endsWith(`-${run.target}`)) {
    throw new RefusedError(`Helm release ${namespace}/${release} has no revision ${rollbackRevision} of the ${run.target} chart any more: make a new plan`);
  }
  await runHelm(run, ['rollback', release, String(rollbackRevision), '-n', namespace, ...(await conflictArgs(run))], `helm rollback ${release}`);
  return `${await settled(client, run, `helm rollback to revision ${rollbackRevision}`)}: rolled back to revision ${rollbackRevision}`;
}
