/**
 * The Helm strategy (issue 31, item 2): a tigera-operator installed by Helm is changed by Helm, so that Helm's record
 * of the release stays the truth (`helm history`, `helm get values`, the next `helm upgrade`). Calico's upgrade docs
 * for a Helm install: the chart does not carry the CRDs for upgrades (Helm installs a chart's crds/ once and never
 * upgrades them), so the target's CRDs are applied first, then `helm upgrade` with the release's values. Going back
 * to a chart version the release's history still has is `helm rollback` to that revision (its chart and values),
 * unless the plan edits pool entries of the values (helm-values.ts): a rollback cannot carry an edit, an upgrade can.
 *
 * Nothing here runs helm: the plan records the release, the action and the chart reference; apply resolves the helm
 * binary itself (apply/helm-steps.ts) and checks the release against the cluster's Helm record again.
 */
import { decodeHelmReleaseData, summarizeHelmRelease, type HelmRelease } from '../calico/helm-release.js';
import { RefusedError } from '../core/errors.js';
import { K } from '../kube/builtin.js';
import { plannedValuesEdits } from './helm-values.js';
import type { KubeClient } from '../kube/client.js';
import type { HelmStrategy, InstallationTransform } from './types.js';
import { findExecutable } from '../util/executable.js';

/** The chart Calico's docs install from (`helm repo add projectcalico https://docs.tigera.io/calico/charts`). */
export const DEFAULT_HELM_CHART = 'projectcalico/tigera-operator';

/** One revision of the release as Helm's record has it. */
export interface HelmRevision {
  revision: number;
  status?: string;
  chartVersion?: string;
}

/** A chart version as Calico releases it (`v3.29.7`) or without the v: compared without it. */
const bare = (v: string | undefined) => v?.replace(/^v/, '');

/**
 * Every revision Helm keeps of `release` in `namespace` (Secrets, or ConfigMaps with HELM_DRIVER=configmap), oldest
 * first, and where Helm keeps them. A record that cannot be decoded is left out (it cannot be rolled back to anyway).
 */
export async function readHelmHistory(
  client: KubeClient,
  release: string,
  namespace: string,
): Promise<{ storage: 'secret' | 'configmap'; revisions: HelmRevision[] }> {
  const selector = `owner=helm,name=${release}`;
  for (const [storage, type] of [
    ['secret', K.secret],
    ['configmap', K.configMap],
  ] as const) {
    const records = await client.listAll(type, { namespace, labelSelector: selector });
    if (!records.length) continue;
    const revisions: HelmRevision[] = [];
    for (const r of records) {
      if (typeof r.data?.release !== 'string') continue;
      try {
        const s = summarizeHelmRelease(decodeHelmReleaseData(r.data.release, storage));
        if (s.revision !== undefined) revisions.push({ revision: s.revision, status: s.status, chartVersion: s.chart?.version });
      } catch {
        // Not Helm's encoding: not a revision Helm could roll back to either.
      }
    }
    return { storage, revisions: revisions.sort((a, b) => a.revision - b.revision) };
  }
  return { storage: 'secret', revisions: [] };
}

/** A chart given as a path on this machine (a packaged .tgz or a chart folder), not a repository reference. */
export function isLocalChart(chart: string): boolean {
  return chart.startsWith('/') || chart.startsWith('./') || chart.startsWith('../') || chart.endsWith('.tgz');
}

/**
 * The plan's Helm strategy, from the cluster's Helm record of the release and its history: for a downgrade,
 * `rollback` to the newest revision whose chart is the target's (superseded: one Helm completed), else `upgrade` with
 * `chart` and, when the Installation transform edits pool entries, values edited the same way. Pure; refuses
 * (exit 5) a release Helm has no deployed revision of rather than working behind Helm's back.
 */
export function planHelmStrategy(input: {
  release: HelmRelease;
  history: HelmRevision[];
  storage: 'secret' | 'configmap';
  target: string;
  direction: 'upgrade' | 'downgrade';
  chart: string;
  chartSha256?: string;
  installation: InstallationTransform;
}): HelmStrategy {
  const { release, history, target } = input;
  const where = `Helm release ${release.namespace}/${release.release}`;
  if (release.unreadable) throw new RefusedError(`${where}: ${release.unreadable}; the plan upgrades a Helm install with Helm and needs its record`);
  const current = release.revision;
  if (current === undefined || release.status !== 'deployed') {
    throw new RefusedError(`${where} has no deployed revision (newest: ${current ?? '?'} ${release.status ?? 'unknown'}): settle it with helm first`);
  }
  // Rewriting the user's pool entries is a change of the chart's values on a Helm install: written behind Helm's back,
  // the next helm upgrade would undo it, so helm upgrade is given the values with the edits (helm-values.ts). Fields
  // the target CRD lacks are removed by transform-installation after helm too: the newer operator's defaults.
  const valuesEdits = plannedValuesEdits(input.installation);
  // Only going back: an upgrade to a chart version the history once had still takes the values as they are now.
  // helm rollback restores that revision's values verbatim, whose Installation lacks the edits (a stopped pool listed
  // there enabled again: calico#9100), so a plan that edits the values upgrades to the target chart instead.
  const back =
    input.direction === 'upgrade' || valuesEdits.length
      ? undefined
      : history.filter((r) => r.revision !== current && bare(r.chartVersion) === bare(target) && r.status === 'superseded').pop();
  const base = {
    release: release.release,
    namespace: release.namespace,
    storage: input.storage,
    currentRevision: current,
    currentChart: release.chart?.version,
  };
  if (back) return { ...base, action: 'rollback', rollbackRevision: back.revision };
  return {
    ...base,
    action: 'upgrade',
    chart: input.chart,
    ...(input.chartSha256 ? { chartSha256: input.chartSha256 } : {}),
    ...(valuesEdits.length ? { valuesEdits } : {}),
  };
}

/**
 * The helm program to run: `--helm PATH` when given, else `helm` on PATH. Refuses (exit 5) in one line when there
 * is none, before anything is written. Read from the command line and PATH of this run, never from a plan file.
 */
export function resolveHelmBinary(given: string | undefined, what: string, env: NodeJS.ProcessEnv = process.env): string {
  const found = findExecutable('helm', given, env);
  if ('path' in found) return found.path;
  if (given) throw new RefusedError(`helm not found: --helm ${given} is not an executable file; ${what}`);
  throw new RefusedError(`helm not found on PATH (a Helm install is changed with helm; install it or pass --helm PATH); ${what}`);
}
