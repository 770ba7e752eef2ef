import { clusterStatus } from '../../status/status.js';
import { handler, type Command } from '../context.js';
import { renderTable } from '../output.js';

export const statusCommand: Command = {
  command: 'status',
  describe: 'Show Kubernetes, the Calico install (type, version, operator, TigeraStatus) and the nodes with their providers',
  handler: handler(async (ctx) => {
    const report = await clusterStatus(await ctx.client());
    ctx.print(report, () => {
      const c = report.calico;
      const lines = [
        `Kubernetes  ${report.kubernetes.version}  (${report.kubernetes.server}, context ${report.kubernetes.context})`,
        `Calico      ${c.installType === 'none' ? 'not installed' : `${c.version ?? 'unknown version'} (${c.installType} install${c.versionSource ? `, version from ${c.versionSource}` : ''})`}`,
      ];
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
