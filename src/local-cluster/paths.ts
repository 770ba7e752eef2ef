import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package root (the folder with cni-rewind's package.json), from src/ or dist/src/. */
export function packageRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pj = path.join(dir, 'package.json');
    if (existsSync(pj)) {
      try {
        if (JSON.parse(readFileSync(pj, 'utf8')).name === 'cni-rewind') return dir;
      } catch {
        /* keep walking */
      }
    }
    const up = path.dirname(dir);
    if (up === dir) throw new Error('cannot find the cni-rewind package root');
    dir = up;
  }
}

/** Where local clusters keep their state (PIDs, kubeconfig, etcd data). Outside the repository. */
export function stateRoot(): string {
  return process.env.CNI_REWIND_STATE_DIR ?? path.join(process.env.XDG_STATE_HOME ?? path.join(os.homedir(), '.local', 'state'), 'cni-rewind');
}

/** The folder holding the Calico release manifests shipped for tests and the demo. */
export function calicoFixturesDir(): string {
  const candidates = [
    process.env.CNI_REWIND_CALICO_FIXTURES,
    path.join(packageRoot(), '..', 'shared', 'fixtures', 'calico'),
    path.join(packageRoot(), 'test', 'fixtures', 'calico'),
  ].filter((x): x is string => !!x);
  const found = candidates.find((c) => existsSync(path.join(c, '3.27.4')));
  if (!found) throw new Error(`Calico release manifests not found (looked in ${candidates.join(', ')})`);
  return found;
}
