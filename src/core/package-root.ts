import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

let root: string | undefined;
/**
 * The package root (the folder with cni-rewind's package.json), from src/ or dist/src/, in a clone and in an
 * installed package alike: everything the tool ships (release manifests, examples, build recipes) is found from here.
 */
export function packageRoot(): string {
  if (root) return root;
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pj = path.join(dir, 'package.json');
    if (existsSync(pj)) {
      try {
        if (JSON.parse(readFileSync(pj, 'utf8')).name === 'cni-rewind') return (root = dir);
      } catch {
        /* keep walking */
      }
    }
    const up = path.dirname(dir);
    if (up === dir) throw new Error('cannot find the cni-rewind package root');
    dir = up;
  }
}
