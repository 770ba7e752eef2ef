import { openBundle } from '../../bundle/reader.js';
import { loadRelease, type Release } from '../../calico/release.js';
import { doctorExitCode, doctorReport, loadBundleState, loadLiveState, type DoctorReport } from '../../doctor/doctor.js';
import type { Finding } from '../../doctor/types.js';
import { BadInputError } from '../../core/errors.js';
import { handler, type CliContext, type Command } from '../context.js';
import { oneLine } from '../output.js';

interface DoctorArgs {
  bundle?: string;
  target?: string;
  manifests?: string;
}

export const doctorCommand: Command<DoctorArgs> = {
  command: 'doctor [bundle]',
  describe: 'Find the known Calico traps (operator-managed pools, IPAM leaks, version skew, unhealthy parts), in the cluster or in a bundle',
  builder: (y) =>
    y
      .positional('bundle', { type: 'string', describe: 'check this bundle offline instead of the live cluster' })
      .option('target', { type: 'string', describe: 'also check against this Calico version (X.Y.Z): its operator rules and CRD schemas' })
      .option('manifests', { type: 'string', describe: 'folder or URL with the --target release manifests (default: shipped fixtures, else the release URL)' })
      .epilogue(
        'Exit codes: 0 no findings · 1 warnings only · 2 errors found (bad input also exits 2, with a one-line cni-rewind: message on stderr) · 4 cluster unreachable',
      ),
  handler: handler<DoctorArgs>(async (ctx, args) => {
    if (args.manifests && !args.target)
      throw new BadInputError('--manifests needs --target VERSION', { hint: 'e.g. cni-rewind doctor --target 3.27.4 --manifests ./calico-3.27.4/' });
    const target: Release | undefined = args.target ? await loadRelease(args.target, { manifests: args.manifests }) : undefined;
    let report: DoctorReport;
    if (args.bundle) {
      const bundle = await openBundle(args.bundle);
      try {
        report = doctorReport(await loadBundleState(bundle), { target });
      } finally {
        await bundle.close();
      }
    } else {
      report = doctorReport(await loadLiveState(await ctx.client()), { target });
    }
    ctx.print(report, () => renderReport(ctx, report));
    return doctorExitCode(report);
  }),
};

const HEADINGS = { error: 'Errors', warning: 'Warnings', info: 'Notes' } as const;

function renderReport(ctx: CliContext, r: DoctorReport): string {
  const s = ctx.style;
  const where =
    r.source.type === 'bundle'
      ? `bundle ${oneLine(r.source.path)}${r.source.createdAt ? ` (exported ${oneLine(r.source.createdAt)})` : ''}`
      : `cluster ${oneLine(r.source.server)}`;
  const lines = [
    `Checked ${where}: ${r.calico.installType === 'none' ? 'Calico not installed' : `Calico ${oneLine(r.calico.version ?? 'version unknown')} (${oneLine(r.calico.installType)} install)`}${r.calico.target ? `, target ${r.calico.target}` : ''}`,
  ];
  for (const sev of ['error', 'warning', 'info'] as const) {
    const fs = r.findings.filter((f) => f.severity === sev);
    if (fs.length === 0) continue;
    const colour = sev === 'error' ? s.red : sev === 'warning' ? s.yellow : s.dim;
    lines.push('', colour(s.bold(`${HEADINGS[sev]} (${fs.length})`)));
    for (const f of fs) lines.push(...renderFinding(f, colour));
  }
  for (const n of r.notes) lines.push('', s.dim(`note: ${oneLine(n)}`));
  const { errors, warnings } = r.summary;
  lines.push(
    '',
    errors + warnings === 0 ? s.green('No problems found.') : `${errors} error(s), ${warnings} warning(s). Each id is explained in docs/troubleshooting.md.`,
  );
  return lines.join('\n');
}

function renderFinding(f: Finding, colour: (t: string) => string): string[] {
  const indent = (t: string) =>
    t
      .split('\n')
      .map((l, i) => (i === 0 ? l : `      ${l}`))
      .join('\n');
  const shown = f.objects.slice(0, 20);
  return [
    '',
    `  ${colour('●')} [${f.id}] ${oneLine(f.title)}`,
    `    objects: ${shown.map(oneLine).join(', ')}${f.objects.length > shown.length ? ` and ${f.objects.length - shown.length} more (-o json lists all)` : ''}`,
    `    why: ${indent(f.why)}`,
    `    fix: ${indent(f.fix)}`,
  ];
}
