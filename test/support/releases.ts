/**
 * The shipped Calico releases (calico-releases/) for tests: their folder works as `--manifests`, their text is read
 * through the same checked reader the tool uses, and a file a command needs by path (kubectl -f) is written out once.
 */
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { readShippedFile, shippedReleasesDir } from '../../src/calico/shipped.js';

export { shippedReleasesDir as releasesDir };

export function releaseText(version: string, file: string): string {
  const got = readShippedFile(version, file);
  if (!got) throw new Error(`Calico ${version} ships no ${file}`);
  return got.text;
}

/** A plain-file copy of a shipped release file (for tools that take a path), in a per-user temp folder. */
export function releaseFilePath(version: string, file: string): string {
  const dir = path.join(os.tmpdir(), `cni-rewind-releases-${process.getuid?.() ?? 'u'}`, version);
  const p = path.join(dir, file);
  if (!existsSync(p)) {
    mkdirSync(dir, { recursive: true });
    const tmp = `${p}.${process.pid}.tmp`;
    writeFileSync(tmp, releaseText(version, file));
    renameSync(tmp, p);
  }
  return p;
}
