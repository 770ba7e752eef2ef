/**
 * The example third-party provider (examples/third-party-provider, plain JavaScript, qcow2 files snapshotted with
 * qemu-img) loaded the way users load one: `--provider-module <path>` on the CLI, against the real test cluster.
 * Also: a broken module gives one clear error naming what is missing, and an error the module throws from the
 * provider kit (`cni-rewind/provider`, resolved by the package's self-reference) keeps its exit code.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.js';
import { createFakeNodes } from '../../src/dev/local-cluster/nodes.js';
import { packageRoot } from '../../src/core/package-root.js';
import { qemuIo } from '../support/libvirtd.js';
import { deleteNodes, runCli, testClient } from './helpers.js';

const PREFIX = 'cnr-tp-';
const SELECTOR = 'cnr-test=third-party';
const MODULE = './examples/third-party-provider/index.js';

describe('third-party provider module loaded by path (examples/third-party-provider)', () => {
  let client: KubeClient;
  let dir: string;
  let imagesDir: string;
  let configFile: string;
  let mappingFile: string;
  let bundlePath = '';
  let bundleId = '';
  const cli = (args: string[]) => runCli(args, { cwd: packageRoot() });

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'cnr-third-party-'));
    imagesDir = path.join(dir, 'images');
    execFileSync('mkdir', ['-p', imagesDir]);
    for (const f of [`${PREFIX}1.qcow2`, `${PREFIX}2-a.qcow2`, `${PREFIX}2-b.qcow2`]) {
      execFileSync('qemu-img', ['create', '-q', '-f', 'qcow2', path.join(imagesDir, f), '16M']);
      await qemuIo(path.join(imagesDir, f), 'write', 0xaa);
    }
    configFile = path.join(dir, 'cni-rewind.yaml');
    writeFileSync(configFile, `providers:\n  qcow2-files:\n    imagesDir: ${imagesDir}\n`);
    // node 1 uses the default <imagesDir>/<node>.qcow2; node 2 has two images given in the mapping file.
    mappingFile = path.join(dir, 'mapping.yaml');
    writeFileSync(
      mappingFile,
      `defaults: { provider: qcow2-files }\nnodes:\n  ${PREFIX}2: { provider: qcow2-files, images: ['${imagesDir}/${PREFIX}2-a.qcow2', '${imagesDir}/${PREFIX}2-b.qcow2'] }\n`,
    );
    client = await testClient();
    await deleteNodes(client, PREFIX);
    await createFakeNodes(
      client,
      [1, 2].map((i) => ({ name: `${PREFIX}${i}`, labels: { 'cnr-test': 'third-party' } })),
    );
  });

  afterAll(async () => {
    await deleteNodes(client, PREFIX);
    client?.close();
  });

  it('backup --provider-module ./examples/third-party-provider/index.js snapshots every image', async () => {
    bundlePath = path.join(dir, 'b1');
    const r = await cli([
      'backup',
      '--provider-module',
      MODULE,
      '--config',
      configFile,
      '--mapping',
      mappingFile,
      '--selector',
      SELECTOR,
      '--out',
      bundlePath,
      '-o',
      'json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const manifest = JSON.parse(readFileSync(path.join(bundlePath, 'manifest.json'), 'utf8'));
    bundleId = manifest.id;
    expect(manifest.complete).toBe(true);
    expect(manifest.snapshots.map((s: any) => `${s.provider} ${s.node} ${path.basename(s.disk)}`).sort()).toEqual([
      `qcow2-files ${PREFIX}1 ${PREFIX}1.qcow2`,
      `qcow2-files ${PREFIX}2 ${PREFIX}2-a.qcow2`,
      `qcow2-files ${PREFIX}2 ${PREFIX}2-b.qcow2`,
    ]);
    for (const s of manifest.snapshots) expect(execFileSync('qemu-img', ['snapshot', '-l', s.disk], { encoding: 'utf8' })).toContain(`cnr.${bundleId}`);
  });

  it('snapshots list with the module finds them through its own tags', async () => {
    const r = await cli([
      'snapshots',
      'list',
      '--provider-module',
      MODULE,
      '--provider',
      'qcow2-files',
      '--config',
      configFile,
      '--bundle',
      bundleId,
      '-o',
      'json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(
      JSON.parse(r.stdout)
        .map((s: any) => s.node)
        .sort(),
    ).toEqual([`${PREFIX}1`, `${PREFIX}2`, `${PREFIX}2`]);
  });

  it('restore BUNDLE --disks through the module (CLI): data written after the snapshot is gone', async () => {
    const [a, b] = [`${PREFIX}2-a.qcow2`, `${PREFIX}2-b.qcow2`].map((f) => path.join(imagesDir, f));
    await qemuIo(a!, 'write', 0xbb);
    await qemuIo(b!, 'write', 0xbb);
    const r = await cli([
      'restore',
      bundlePath,
      '--disks',
      '--nodes',
      `${PREFIX}2`,
      '--provider-module',
      MODULE,
      '--config',
      configFile,
      '--mapping',
      mappingFile,
      '--yes',
      '-o',
      'json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    for (const f of [a!, b!]) {
      expect(await qemuIo(f, 'read', 0xaa)).toBe(true);
      expect(await qemuIo(f, 'read', 0xbb)).toBe(false);
    }
  });

  it('snapshots delete with the module removes them', async () => {
    const r = await cli([
      'snapshots',
      'delete',
      '--provider-module',
      MODULE,
      '--provider',
      'qcow2-files',
      '--config',
      configFile,
      '--bundle',
      bundleId,
      '--yes',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(execFileSync('qemu-img', ['snapshot', '-l', path.join(imagesDir, `${PREFIX}1.qcow2`)], { encoding: 'utf8' })).not.toContain('cnr.');
  });

  it('a branded error the module throws from the kit keeps its exit code and its one line (imagesDir not a folder: exit 2)', async () => {
    const badConfig = path.join(dir, 'bad-images-dir.yaml');
    const missing = path.join(dir, 'no-such-folder');
    writeFileSync(badConfig, `providers:\n  qcow2-files:\n    imagesDir: ${missing}\n`);
    const r = await cli(['snapshots', 'list', '--provider-module', MODULE, '--provider', 'qcow2-files', '--config', badConfig]);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toBe(
      `cni-rewind: qcow2-files: imagesDir ${missing} is not a folder\n  set providers.qcow2-files.imagesDir in the config file to the folder holding the node images\n`,
    );
  });

  it('a broken module: one clear line naming what is missing, exit 2', async () => {
    const broken = path.join(dir, 'broken.mjs');
    writeFileSync(broken, `export default { name: 'broken', create() { return {}; } };\n`);
    const r = await cli(['backup', '--provider-module', broken, '--selector', SELECTOR, '--out', path.join(dir, 'b-broken')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`provider module ${broken} is not a valid cni-rewind provider: apiVersion is missing (expected 'cni-rewind.provider/v1')`);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});
