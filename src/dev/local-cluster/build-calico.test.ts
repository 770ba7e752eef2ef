import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../core/package-root.js';
import { calicoProgramCached } from './calico-programs.js';

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

  it('finds a cached program where calicoProgramCached says it is (the same cache key as the script)', () => {
    const cache = path.join(tmp, 'keyed');
    const prev = process.env.CNI_REWIND_E2E_CACHE;
    process.env.CNI_REWIND_E2E_CACHE = cache;
    try {
      for (const [kind, tag, commit, bins] of [
        ['operator', 'v1.34.3', 'feba8ee90b5c134fe3c67caddf2a1a713644701e', ['operator']],
        ['ipam-driver', 'v3.28.1', '6018563438f3aacf5e043dea0c567abe5d34c08a', ['ipam-driver']],
      ] as const) {
        expect(calicoProgramCached(kind, tag)).toBe(false);
        // Plant what a finished build leaves where calicoProgramCached looks, then ask the script: without Go on its
        // PATH it can only answer by finding the build cached there.
        const bin = plantCached(cache, kind, tag, commit, bins);
        expect(calicoProgramCached(kind, tag)).toBe(true);
        const r = spawnSync('bash', [script, kind, tag], { encoding: 'utf8', env: { ...process.env, CNI_REWIND_E2E_CACHE: cache, PATH: '/usr/bin:/bin' } });
        expect(r.status, r.stderr).toBe(0);
        expect(r.stdout.trim()).toBe(bin);
      }
    } finally {
      if (prev === undefined) delete process.env.CNI_REWIND_E2E_CACHE;
      else process.env.CNI_REWIND_E2E_CACHE = prev;
    }
  });
});

/** What a finished build leaves (binaries, the tag commit marker), keyed as calicoProgramCached keys it. */
function plantCached(cache: string, kind: string, tag: string, commit: string, bins: readonly string[]): string {
  const files = [script, ...(kind === 'ipam-driver' ? ['go.mod', 'main.go'].map((f) => path.join(packageRoot(), 'control-plane', 'ipam-driver', f)) : [])];
  const recipe = createHash('sha256')
    .update(Buffer.concat(files.map((f) => readFileSync(f))))
    .digest('hex')
    .slice(0, 12);
  const bin = path.join(cache, 'calico-programs', `${kind}-${tag}_${recipe}`, 'bin');
  mkdirSync(bin, { recursive: true });
  for (const b of bins) writeFileSync(path.join(bin, b), '#!/bin/sh\n', { mode: 0o755 });
  writeFileSync(path.join(bin, '.commit'), `${commit}\n`);
  return bin;
}

// control-plane/build-calico-node.sh: its own cache key (script, calico-source.sh, calico-node/main.go), the pins of
// build-calico.sh and calico-releases.pins.
describe('build-calico-node.sh', () => {
  const nodeScript = path.join(packageRoot(), 'control-plane', 'build-calico-node.sh');
  const runNode = (tag: string, env: Record<string, string>) =>
    spawnSync('bash', [nodeScript, tag], { encoding: 'utf8', env: { ...process.env, CNI_REWIND_E2E_CACHE: path.join(tmp, 'node-cache'), ...env } });

  it('refuses a Calico tag no pin names, naming the pinned ones of both tables', () => {
    const r = runNode('v3.99.0', {});
    expect(r.status).toBe(2);
    expect(r.stderr.trim()).toMatch(
      /^build-calico-node.sh: unknown Calico version 'v3.99.0' \(known: v3.27.4 v3.28.1 v3.29.7 v3.30.7 v3.31.7 v3.32.1 v3.26.5 v3.27.5 v3.28.5 \)$/,
    );
  });

  it('takes a release pinned in calico-releases.pins from the same checked source', () => {
    const r = runNode('v3.32.1', { CNI_REWIND_SOURCE_MIRROR: path.join(tmp, 'empty') });
    expect(r.status).toBe(4);
    expect(r.stderr).toContain('projectcalico-calico-v3.32.1.tar.gz not found in CNI_REWIND_SOURCE_MIRROR');
  });

  it('finds its cached build where calicoProgramCached says it is', () => {
    const cache = path.join(tmp, 'node-keyed');
    const prev = process.env.CNI_REWIND_E2E_CACHE;
    process.env.CNI_REWIND_E2E_CACHE = cache;
    try {
      expect(calicoProgramCached('node-side', 'v3.28.1')).toBe(false);
      const lite = ['main.go', 'version_startup.go', 'version_buildinfo.go', 'allocator_done_channel.go', 'allocator_context.go'];
      const files = [
        nodeScript,
        path.join(packageRoot(), 'control-plane', 'calico-source.sh'),
        ...lite.map((f) => path.join(packageRoot(), 'control-plane', 'calico-node', f)),
      ];
      const recipe = createHash('sha256')
        .update(Buffer.concat(files.map((f) => readFileSync(f))))
        .digest('hex')
        .slice(0, 12);
      const bin = path.join(cache, 'calico-programs', `node-side-v3.28.1_${recipe}`, 'bin');
      mkdirSync(bin, { recursive: true });
      for (const b of ['calico-node-lite', 'calico', 'calico-ipam']) writeFileSync(path.join(bin, b), '#!/bin/sh\n', { mode: 0o755 });
      writeFileSync(path.join(bin, '.commit'), '6018563438f3aacf5e043dea0c567abe5d34c08a\n');
      expect(calicoProgramCached('node-side', 'v3.28.1')).toBe(true);
      // Without Go on its PATH the script can only answer by finding the build cached there.
      const r = runNode('v3.28.1', { CNI_REWIND_E2E_CACHE: cache, PATH: '/usr/bin:/bin' });
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout.trim()).toBe(bin);
    } finally {
      if (prev === undefined) delete process.env.CNI_REWIND_E2E_CACHE;
      else process.env.CNI_REWIND_E2E_CACHE = prev;
    }
  });
});

// control-plane/build-calico-release.sh: the releases of calico-releases.pins, each keyed by the script, the shared
// source steps and its own pin line.
describe('build-calico-release.sh', () => {
  const releaseScript = path.join(packageRoot(), 'control-plane', 'build-calico-release.sh');
  const runRelease = (args: string[], env: Record<string, string>) =>
    spawnSync('bash', [releaseScript, ...args], { encoding: 'utf8', env: { ...process.env, CNI_REWIND_E2E_CACHE: path.join(tmp, 'release-cache'), ...env } });

  it('refuses what calico-releases.pins does not pin, in one line naming what it does', () => {
    for (const args of [
      ['operator', 'v1.34.3'],
      ['ipam-driver', 'v3.32.1'],
    ]) {
      const r = runRelease(args, {});
      expect(r.status).toBe(2);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toContain(
        `unknown program or version '${args.join(' ')}' (known: operator v1.40.15, operator v1.42.3, calico v3.31.7, calico v3.32.1, operator v1.30.11, operator v1.32.12, operator v1.34.13, calico v3.26.5, calico v3.27.5, calico v3.28.5, )`,
      );
    }
  });

  it('checks a mirror file against its own pin', () => {
    const mirror = path.join(tmp, 'release-mirror');
    mkdirSync(mirror, { recursive: true });
    writeFileSync(path.join(mirror, 'tigera-operator-v1.42.3.tar.gz'), 'not the upstream archive');
    const r = runRelease(['operator', 'v1.42.3'], { CNI_REWIND_SOURCE_MIRROR: mirror });
    expect(r.status).toBe(4);
    expect(r.stderr).toMatch(/tigera-operator-v1.42.3.tar.gz: sha256 [0-9a-f]{64}, expected 5fade329/);
  });

  it("finds its cached build where calicoProgramCached says it is, keyed by the release's pin line", () => {
    const cache = path.join(tmp, 'release-keyed');
    const prev = process.env.CNI_REWIND_E2E_CACHE;
    process.env.CNI_REWIND_E2E_CACHE = cache;
    try {
      const commit = '40f3e3d35845ec159148b0a726ca069bf104d680';
      const pinLine = `operator v1.42.3 ${commit} 5fade329962cd8a207acc254f7546c244281750a60c5ef59af0afffa51ecf5e9\n`;
      const recipe = createHash('sha256')
        .update(Buffer.concat([readFileSync(releaseScript), readFileSync(path.join(packageRoot(), 'control-plane', 'calico-source.sh')), Buffer.from(pinLine)]))
        .digest('hex')
        .slice(0, 12);
      expect(calicoProgramCached('operator', 'v1.42.3')).toBe(false);
      const bin = path.join(cache, 'calico-programs', `operator-v1.42.3_${recipe}`, 'bin');
      mkdirSync(bin, { recursive: true });
      writeFileSync(path.join(bin, 'operator'), '#!/bin/sh\n', { mode: 0o755 });
      writeFileSync(path.join(bin, '.commit'), `${commit}\n`);
      expect(calicoProgramCached('operator', 'v1.42.3')).toBe(true);
      // Without Go on its PATH the script can only answer by finding the build cached there.
      const r = runRelease(['operator', 'v1.42.3'], { CNI_REWIND_E2E_CACHE: cache, PATH: '/usr/bin:/bin' });
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout.trim()).toBe(bin);
    } finally {
      if (prev === undefined) delete process.env.CNI_REWIND_E2E_CACHE;
      else process.env.CNI_REWIND_E2E_CACHE = prev;
    }
  });
});
