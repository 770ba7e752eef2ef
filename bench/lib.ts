/** Helpers shared by the benchmark scripts (they are scripts, not tests: figures go into docs/BENCHMARKS.md). */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { packageRoot } from '../src/core/package-root.js';

/** `--name value` from the command line. */
export function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
}

/** The kubectl built with the test control plane (same version as the API server). */
export function findKubectl(): string {
  const base = path.join(os.homedir(), '.cache', 'cni-rewind-e2e');
  for (const d of fs.existsSync(base) ? fs.readdirSync(base) : []) {
    const p = path.join(base, d, 'bin', 'kubectl');
    if (fs.existsSync(p)) return p;
  }
  throw new Error(`no kubectl under ${base}/*/bin (run control-plane/build.sh)`);
}

/** $KUBECONFIG, else the local cluster instance's (CNI_REWIND_CLUSTER_NAME, default e2e, as `npm run cluster`). */
export function kubeconfigPath(): string {
  if (process.env.KUBECONFIG) return process.env.KUBECONFIG;
  const name = process.env.CNI_REWIND_CLUSTER_NAME ?? 'e2e';
  return path.join(os.homedir(), '.local/state/cni-rewind/local-cluster', name, 'kubeconfig');
}

/** Replace (or append) the `## <title>` section of docs/BENCHMARKS.md, atomically. */
export function replaceBenchmarkSection(title: string, section: string): void {
  const doc = path.join(packageRoot(), 'docs/BENCHMARKS.md');
  const current = fs.existsSync(doc) ? fs.readFileSync(doc, 'utf8') : '# Benchmarks\n\nFigures measured by the scripts in `bench/` (never by timed tests).\n\n';
  const start = current.indexOf(`## ${title}\n`);
  let next: string;
  if (start < 0) next = current.trimEnd() + '\n\n' + section;
  else {
    const after = current.indexOf('\n## ', start + 1);
    // A blank line between this section and the next one, whatever the section ends with.
    next = current.slice(0, start) + (after < 0 ? section : section.trimEnd() + '\n\n' + current.slice(after + 1));
  }
  const tmp = `${doc}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, next);
  fs.renameSync(tmp, doc);
}

export const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** The line every section starts with: when, where (cores, load average), versions and the exact command. */
export function benchHeader(script: string, command: string, versions: string[] = []): string {
  const load = os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' / ');
  return (
    `Measured by \`${script}\` on ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}: ${os.cpus().length} CPU cores shared with other work, ` +
    `load average ${load} (1/5/15 min) at the end of the run; Node ${process.version}, ${os.type()} ${os.release()}${versions.length ? ', ' + versions.join(', ') : ''}. ` +
    `Command: \`${command}\`.`
  );
}
