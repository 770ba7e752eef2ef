import { spawn } from 'node:child_process';
import path from 'node:path';
import { packageRoot } from '../../core/package-root.js';

/**
 * Calico's own control-plane programs for the local cluster, built from the upstream release source by
 * control-plane/build-calico.sh and cached by version (docs/calico-programs.md).
 */
export type CalicoProgramKind = 'operator' | 'calico' | 'ipam-driver';

/** The Calico tree whose API server, calicoctl and kube-controllers serve every installed Calico version. */
export const CALICO_PROGRAMS_VERSION = 'v3.28.1';

/** Operator tags the build script has pinned sources for (image tag -> buildable). */
export const BUILDABLE_OPERATORS = ['v1.32.10', 'v1.34.3', 'v1.36.16', 'v1.38.13'] as const;

/**
 * Build (or find cached) one program set and return its bin directory. The build prints a progress line at
 * least every 30 s; those lines go to `log`. Asynchronous so that a supervisor keeps serving while it builds.
 */
export function ensureCalicoProgram(kind: CalicoProgramKind, tag: string, log: (line: string) => void = () => {}): Promise<string> {
  const script = path.join(packageRoot(), 'control-plane', 'build-calico.sh');
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [script, kind, tag], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (b) => (out += b));
    child.stderr.on('data', (b: Buffer) => {
      err += b;
      for (const line of b.toString().split('\n')) if (line.startsWith('[calico-build') || line.startsWith('build-calico.sh:')) log(line);
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code === 0) return resolve(out.trim().split('\n').pop()!);
      const last = err
        .trim()
        .split('\n')
        .filter((l) => l.startsWith('build-calico.sh:'))
        .pop();
      reject(new Error(`building ${kind} ${tag} failed (exit ${code})${last ? `: ${last}` : ''}`));
    });
  });
}
