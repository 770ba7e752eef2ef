import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../../core/package-root.js';

/**
 * `snapshots list|delete` close the providers they opened when listing fails: a provider left open keeps its SDK
 * clients and sockets. Runs the built CLI (npm test builds first) with a third-party provider whose list() throws
 * and whose close() leaves a mark; `--provider NAME --all-clusters` needs no cluster.
 */
const dir = mkdtempSync(path.join(tmpdir(), 'cnr-snapshots-cli-'));
const closedMark = path.join(dir, 'closed');
const module = path.join(dir, 'failing.mjs');
writeFileSync(
  module,
  `import { appendFileSync } from 'node:fs';
export default { apiVersion: 'cni-rewind.provider/v1', name: 'failing', create: () => ({ name: 'failing',
  resolve: async () => undefined, snapshot: async () => [], waitUsable: async (r) => r, restoreDisks: async (t) => ({ node: t.node, restored: [], notes: [] }),
  reboot: async () => {}, delete: async () => {},
  list: async () => { throw new Error('the snapshot API is down'); },
  close: async () => appendFileSync(${JSON.stringify(closedMark)}, 'closed\\n') }) };`,
);

function snapshots(...args: string[]) {
  const main = path.join(packageRoot(), 'dist', 'src', 'cli', 'main.js');
  return spawnSync(process.execPath, [main, 'snapshots', ...args, '--provider', 'failing', '--provider-module', module, '--all-clusters', '--no-color'], {
    cwd: dir,
    encoding: 'utf8',
    env: { ...process.env, KUBECONFIG: path.join(dir, 'none') },
  });
}

describe('snapshots with a provider that fails to list', () => {
  for (const args of [['list'], ['delete', '--bundle', 'b-1', '--yes']]) {
    it(`snapshots ${args[0]}: exits 4 with one line and closes the provider`, () => {
      writeFileSync(closedMark, '');
      const r = snapshots(...args);
      expect(r.stderr).toBe('cni-rewind: provider failing: listing snapshots failed: the snapshot API is down\n');
      expect(r.status).toBe(4);
      expect(existsSync(closedMark) && readFileSync(closedMark, 'utf8')).toBe('closed\n');
    });
  }
});
