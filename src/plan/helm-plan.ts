/**
 * `plan` on a Helm-installed tigera-operator: the Helm strategy from the cluster's Helm record and history
 * (helm-strategy.ts), with the helm program and the target chart checked now, so a plan that apply could not
 * carry out is refused (exit 5) before it is written.
 */
import type { HelmRelease } from '../calico/helm-release.js';
import { BadInputError } from '../core/errors.js';
import type { KubeClient } from '../kube/client.js';
import { chartFileSha256, checkChart } from './helm-cli.js';
import { DEFAULT_HELM_CHART, planHelmStrategy, readHelmHistory, resolveHelmBinary } from './helm-strategy.js';
import type { HelmStrategy, InstallationTransform, Strategy } from './types.js';

export async function planHelm(
  client: KubeClient,
  release: HelmRelease | undefined,
  opts: { to: string; helm?: string; helmChart?: string; strategy: Strategy; direction: 'upgrade' | 'downgrade'; installation: InstallationTransform },
): Promise<HelmStrategy> {
  if (!release) throw new BadInputError('the tigera-operator carries Helm annotations without a release name');
  if (opts.strategy === 'reinstall')
    throw new BadInputError('--strategy reinstall is not implemented for a Helm install; use in-place (helm upgrade or rollback)');
  const bin = resolveHelmBinary(opts.helm, 'no plan was made');
  const { storage, revisions } = await readHelmHistory(client, release.release, release.namespace);
  const target = opts.to.startsWith('v') ? opts.to : `v${opts.to}`;
  const chart = opts.helmChart ?? DEFAULT_HELM_CHART;
  const strategy = planHelmStrategy({
    release,
    history: revisions,
    storage,
    target,
    direction: opts.direction,
    chart,
    chartSha256: chartFileSha256(chart),
    installation: opts.installation,
  });
  // A rollback uses the chart Helm recorded for that revision; an upgrade's chart must be the target's.
  if (strategy.action === 'upgrade') await checkChart({ bin, kubeArgs: [], storage }, chart, target);
  return strategy;
}
