import { shippedReleases } from '../../calico/shipped.js';
import { handler, type Command } from '../context.js';
import { renderTable } from '../output.js';

/** The Calico releases whose manifests ship in the package: plan, doctor --target and restore work offline for them. */
export const releasesCommand: Command = {
  command: 'releases',
  describe: 'List the Calico releases cni-rewind ships manifests for (usable offline; others need --manifests)',
  handler: handler(async (ctx) => {
    const rows = shippedReleases().map((r) => ({
      version: r.version,
      operatorImage: r.operatorImage ?? null,
      installTypes: r.installTypes,
      operatorCrdsYaml: 'operator-crds.yaml' in r.files,
      crds: r.crds['operator-crds.yaml'] ?? r.crds['tigera-operator.yaml'] ?? 0,
      files: Object.keys(r.files),
    }));
    ctx.print(rows, () =>
      [
        renderTable(rows, [
          { header: 'calico', value: (r) => r.version },
          { header: 'operator image', value: (r) => r.operatorImage ?? '-' },
          { header: 'install types', value: (r) => r.installTypes.join(', ') },
          { header: 'operator-crds.yaml', value: (r) => (r.operatorCrdsYaml ? 'yes' : 'no') },
          { header: 'crds', value: (r) => r.crds },
        ]),
        '',
        'Any other version: plan/doctor --manifests <folder|URL> (the release URL is tried when online).',
      ].join('\n'),
    );
  }),
};
