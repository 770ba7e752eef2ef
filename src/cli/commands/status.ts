import { clusterStatus } from '../../status/status.js';
import { handler, type Command } from '../context.js';
import { renderTable } from '../output.js';
import type { ImageSource, InstallMethod } from '../../calico/install-method.js';
import type { HelmRelease } from '../../calico/helm-release.js';

const METHOD_NAMES: Record<InstallMethod['method'], string> = {
  'operator-helm': 'tigera-operator by Helm',
  'operator-manifest': 'tigera-operator by manifest (tigera-operator.yaml)',
  manifest: 'manifest (calico.yaml)',
  canal: 'Canal (canal DaemonSet, Calico policy beside flannel)',
  'rke2-chart': "RKE2's rke2-calico chart",
  'managed-addon': 'managed add-on',
  none: 'none found',
};

function imageLine(i: ImageSource): string {
  const version = i.version ? `version ${i.version}${i.vendor ? ` (vendor ${i.vendor})` : ''}` : 'version not in the tag';
  return `Image       ${i.component}: registry ${i.registry}, ${i.digest ? 'pinned by digest' : 'by tag'}, ${version}`;
}

/** What Helm's record of the release says: chart, revision, status and which values the user set (names only). */
function helmLine(h: HelmRelease): string {
  if (h.unreadable) return `Helm        release record not read: ${h.unreadable}`;
  const chart = h.chart ? `chart ${h.chart.name ?? '?'} ${h.chart.version ?? '?'}${h.chart.appVersion ? ` (app ${h.chart.appVersion})` : ''}` : 'chart unknown';
  const keys = h.valueKeys ?? [];
  const values = keys.length || h.otherValueKeys ? `${keys.join(', ')}${h.otherValueKeys ? ` and ${h.otherValueKeys} more` : ''}` : 'none';
  return `Helm        revision ${h.revision ?? '?'} (${h.status ?? 'status unknown'}), ${chart}, values set: ${values}`;
}

/** Datastore, install method, GitOps owners and image sources, one line each. */
function installMethodLines(m: InstallMethod): string[] {
  const method =
    METHOD_NAMES[m.method] +
    (m.helm ? ` (release ${m.helm.namespace}/${m.helm.release})` : '') +
    (m.managedBy && m.method !== 'rke2-chart' ? ` (managed by ${m.managedBy})` : '');
  return [
    `Datastore   ${m.datastore.type === 'etcd' ? `etcd (${m.datastore.evidence}): export, backup, restore and plan --to work on etcd; plan --migrate-datastore moves it to Kubernetes` : 'Kubernetes'}`,
    `Installed   ${method}`,
    ...(m.helm ? [helmLine(m.helm)] : []),
    `GitOps      ${m.gitOps.length ? m.gitOps.map((g) => `${g.tool} ${g.name} (on ${g.object})`).join('; ') : 'no Argo CD or Flux owner found'}`,
    ...m.images.map(imageLine),
    ...(m.installationImages
      ? [
          `Image       the operator's Calico images: ${Object.entries(m.installationImages)
            .map(([k, v]) => `${k} ${v}`)
            .join(', ')} (Installation default)`,
        ]
      : []),
  ];
}

export const statusCommand: Command = {
  command: 'status',
  describe:
    'Show Kubernetes, the Calico install (type, version, datastore, install method, GitOps owner, images, operator, TigeraStatus) and the nodes with their providers',
  handler: handler(async (ctx) => {
    const report = await clusterStatus(await ctx.client());
    ctx.print(report, () => {
      const c = report.calico;
      const lines = [
        `Kubernetes  ${report.kubernetes.version}  (${report.kubernetes.server}, context ${report.kubernetes.context})`,
        `Calico      ${c.installType === 'none' ? 'not installed' : `${c.version ?? 'unknown version'} (${c.installType} install${c.versionSource ? `, version from ${c.versionSource}` : ''})`}`,
      ];
      if (c.installType !== 'none') lines.push(...installMethodLines(c.method));
      if (c.operatorImage) lines.push(`Operator    ${c.operatorImage} (replicas ${c.operatorReplicas ?? '?'})`);
      if (c.calicoNodeImage) lines.push(`calico-node ${c.calicoNodeImage} (${c.calicoNodeNamespace})`);
      for (const ts of c.tigeraStatus) {
        const conds = ts.conditions.filter((x) => x.status === 'True').map((x) => x.type + (x.message ? `: ${x.message}` : ''));
        lines.push(`TigeraStatus ${ts.name}: ${conds.join('; ') || 'no conditions'}`);
      }
      lines.push(
        '',
        renderTable(report.nodes, [
          { header: 'node', value: (n) => n.name },
          { header: 'ready', value: (n) => (n.ready ? 'yes' : 'no') + (n.unschedulable ? ',cordoned' : '') },
          { header: 'provider', value: (n) => n.provider },
          { header: 'providerID', value: (n) => n.providerID ?? '-' },
        ]),
      );
      return lines.join('\n');
    });
  }),
};
