import { openBundle } from '../../bundle/reader.js';
import { diffBundle, hasDifferences, type Ref } from '../../diff/diff.js';
import { ExitCode } from '../../core/errors.js';
import { handler, reportError, type Command } from '../context.js';
import { withKindsOption } from '../kinds-option.js';
import { etcdAccess, etcdOptions, type EtcdArgs } from '../etcd-options.js';

interface DiffArgs extends EtcdArgs {
  bundle: string;
  kinds?: string[];
}

const show = (r: Ref) => `${r.kind} ${r.namespace ? `${r.namespace}/` : ''}${r.name}`;

export const diffCommand: Command<DiffArgs> = {
  command: 'diff <bundle>',
  describe: 'Compare the live cluster with a bundle; exit 0 no differences, 1 differences, 2 or more trouble (like diff(1); 2 bad input, 4 environment)',
  builder: (y) =>
    withKindsOption(
      etcdOptions(y).positional('bundle', { type: 'string', demandOption: true, describe: 'bundle directory or .tar.gz' }),
      'only these kinds (IPPool, ippools or ippools.crd.projectcalico.org; crds for the CRDs)',
    ) as any,
  handler: handler<DiffArgs>(async (ctx, args) => {
    try {
      const b = await openBundle(args.bundle);
      try {
        const etcd = etcdAccess(args);
        const r = await diffBundle(await ctx.client(), b, { kinds: args.kinds, ...(etcd ? { etcd } : {}) }, ctx.reporter);
        ctx.print(r, () => {
          if (!hasDifferences(r)) return `no differences (${r.same} objects compared)`;
          const lines: string[] = [];
          for (const x of r.onlyInBundle) lines.push(`only in bundle:  ${show(x)}`);
          for (const x of r.onlyInCluster) lines.push(`only in cluster: ${show(x)}`);
          for (const m of r.moved) lines.push(`moved:           ${show(m.from)} (bundle) -> ${show(m.to)} (cluster)${m.diff ? ', content changed too' : ''}`);
          for (const c of r.changed) lines.push(`changed:         ${show(c.ref)}`);
          for (const c of r.changed) lines.push('', c.diff.trimEnd());
          for (const m of r.moved) if (m.diff) lines.push('', m.diff.trimEnd());
          return lines.join('\n');
        });
        return hasDifferences(r) ? ExitCode.Differences : ExitCode.Ok;
      } finally {
        await b.close();
      }
    } catch (err) {
      // Like diff(1), trouble is never 0 or 1 (1 means differences): the README's code of the error (2 bad input,
      // 4 environment, ...), and 2 for an unexpected error, whose code elsewhere is 1.
      const code = reportError(err, args.verbose, ctx.style);
      return code > ExitCode.Differences ? code : ExitCode.BadInput;
    }
  }),
};
