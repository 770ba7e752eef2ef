import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../core/package-root.js';

// The source checks of control-plane/build-calico.sh, run against a private cache and mirror (no build).
const script = path.join(packageRoot(), 'control-plane', 'build-calico.sh');
const tmp = mkdtempSync(path.join(os.tmpdir(), 'build-calico-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function run(args: string[], env: Record<string, string>) {
  const res = spawnSync('bash', [script, ...args], { encoding: 'utf8', env: { ...process.env, CNI_REWIND_E2E_CACHE: path.join(tmp, 'cache'), ...env } });
  return { code: res.status, stderr: res.stderr.trim() };
}

describe('build-calico.sh', () => {
  it('refuses a version it has no pinned source for, in one line', () => {
    const r = run(['operator', 'v1.99.0'], {});
    expect(r.code).toBe(2);
    expect(r.stderr.split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/unknown program or version 'operator v1.99.0' \(known: operator v1.32.10, /);
  });

  it('refuses a mirror file whose sha256 is not the pinned one', () => {
    const mirror = path.join(tmp, 'mirror');
    spawnSync('mkdir', ['-p', mirror]);
    writeFileSync(path.join(mirror, 'tigera-operator-v1.34.3.tar.gz'), 'not the upstream archive');
    const r = run(['operator', 'v1.34.3'], { CNI_REWIND_SOURCE_MIRROR: mirror });
    expect(r.code).toBe(4);
    expect(r.stderr).toMatch(/tigera-operator-v1.34.3.tar.gz: sha256 [0-9a-f]{64}, expected 02e73295/);
  });

  it('builds the IPAM driver from the pinned Calico tree (same archive and checks), and only for pinned trees', () => {
    const r = run(['ipam-driver', 'v3.28.1'], { CNI_REWIND_SOURCE_MIRROR: path.join(tmp, 'empty') });
    expect(r.code).toBe(4);
    expect(r.stderr).toContain('projectcalico-calico-v3.28.1.tar.gz not found in CNI_REWIND_SOURCE_MIRROR');
    expect(run(['ipam-driver', 'v3.99.0'], {}).stderr).toMatch(/unknown program or version 'ipam-driver v3.99.0'/);
  });

  it('says which file a mirror lacks', () => {
    const r = run(['calico', 'v3.28.1'], { CNI_REWIND_SOURCE_MIRROR: path.join(tmp, 'empty') });
    expect(r.code).toBe(4);
    expect(r.stderr).toContain('projectcalico-calico-v3.28.1.tar.gz not found in CNI_REWIND_SOURCE_MIRROR');
  });
});
