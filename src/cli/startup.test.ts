import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { heavyModules, moduleTrace, type ModuleTrace } from '../../test/support/module-trace.js';
import { resourcePathFor } from '../bundle/paths.js';
import { BundleWriter } from '../bundle/writer.js';
import { packageRoot } from '../core/package-root.js';

/**
 * `--help`, `version` and `inspect` (the commands that need no cluster) must start without importing the Kubernetes
 * client or any cloud SDK: they are what make start-up slow (see docs/BENCHMARKS.md). The commands that talk to the
 * cluster load the client as the one file the build bundles it into, and few other files, before their first
 * request. Runs the built CLI (dist/, as `npm test` builds it) under a module-resolution trace.
 */
const root = packageRoot();
const main = path.join(root, 'dist/src/cli/main.js');
let dir: string;
let trace: ModuleTrace;
let bundle: string;

function traced(script: string, args: string[], env: Record<string, string> = {}) {
  trace.reset();
  const r = spawnSync(process.execPath, [...trace.nodeArgs, script, ...args], {
    cwd: dir,
    encoding: 'utf8',
    env: { ...process.env, ...trace.env, NO_COLOR: '1', ...env },
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, modules: trace.modules() };
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-startup-test-'));
  trace = moduleTrace(dir);
  const pool = { apiVersion: 'crd.projectcalico.org/v1', kind: 'IPPool', metadata: { name: 'default-ipv4-ippool' }, spec: { cidr: '10.0.0.0/16' } };
  const w = await BundleWriter.open(path.join(dir, 'bundle'));
  await w.writeObject(resourcePathFor(pool as any), pool as any);
  w.manifest.counts = { 'ippools.crd.projectcalico.org': 1 };
  bundle = await w.commit();
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('start-up of the commands that need no cluster', () => {
  it('the trace sees the Kubernetes client and the AWS SDK when they are loaded (control)', () => {
    // Without this, an empty list below could mean "the hooks saw nothing" rather than "nothing heavy was loaded".
    const control = path.join(dir, 'control.mjs');
    const registry = path.join(root, 'dist/src/providers/registry.js');
    fs.writeFileSync(
      control,
      `import { createRequire } from 'node:module';\n` +
        `const require = createRequire(${JSON.stringify(main)});\n` +
        `await import(require.resolve('@kubernetes/client-node'));\n` +
        `const { builtinProviders } = await import(${JSON.stringify(registry)});\nawait builtinProviders.aws();\n`,
    );
    const r = traced(control, []);
    expect(r.status, r.stderr).toBe(0);
    const heavy = heavyModules(r.modules);
    expect([...heavy.keys()].sort()).toEqual(['@kubernetes/client-node', 'AWS SDK', 'provider modules']);
  });

  for (const args of [['--help'], ['version'], ['inspect', '<bundle>'], ['inspect', '<bundle>', '-o', 'yaml']]) {
    it(`cni-rewind ${args.join(' ')} loads neither @kubernetes/client-node nor a cloud SDK nor a provider`, () => {
      const r = traced(
        main,
        args.map((a) => (a === '<bundle>' ? bundle : a)),
      );
      expect(r.status, r.stderr).toBe(0);
      // The command did run (not a usage error that stopped early).
      expect(r.stdout).toMatch(
        args[0] === '--help' ? /cni-rewind inspect <bundle>/ : args[0] === 'version' ? /bundle format/ : /default-ipv4-ippool|ippools\.crd\.projectcalico\.org/,
      );
      expect(
        r.modules.some((m) => m.endsWith('/dist/src/cli/main.js')),
        'the trace saw the CLI itself',
      ).toBe(true);
      expect(Object.fromEntries(heavyModules(r.modules))).toEqual({});
    });
  }
});

/**
 * The most module files a cluster command may load before its first request. With @kubernetes/client-node loaded
 * as a package it was about 990 (802 of them the library's) and the first request came seconds after the start;
 * bundled it was about 100, and with yargs bundled too and cli-progress loaded only for a bar (tools/bundle-libraries.mjs)
 * 34 (status) to 58 (doctor). A count, not a time, so that a shared machine's load cannot make it pass or fail;
 * docs/BENCHMARKS.md (start-up) has the times.
 */
const CLUSTER_COMMAND_MODULE_BUDGET = 80;

describe('start-up of the commands that talk to the cluster', () => {
  /** A kubeconfig for a port where nothing listens: the command gets as far as its first request, which is refused. */
  const closedPortKubeconfig = async () => {
    const server = net.createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as net.AddressInfo).port;
    await new Promise<void>((r) => server.close(() => r()));
    const file = path.join(dir, 'kubeconfig-closed-port');
    fs.writeFileSync(
      file,
      `apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:${port}\n    insecure-skip-tls-verify: true\n` +
        `contexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: not-a-secret}\n`,
    );
    return file;
  };

  for (const args of [['status'], ['export', '--out', '<out>'], ['doctor']]) {
    it(`cni-rewind ${args[0]} loads the Kubernetes client as one bundled file and at most ${CLUSTER_COMMAND_MODULE_BUDGET} module files before its first request`, async () => {
      const kubeconfig = await closedPortKubeconfig();
      const r = traced(
        main,
        args.map((a) => (a === '<out>' ? path.join(dir, 'export-out') : a)),
        { KUBECONFIG: kubeconfig },
      );
      // It got as far as sending its first request (refused: exit 4, environment error), so all it loads before that was loaded.
      expect(r.stderr).toMatch(/cannot reach the Kubernetes API server \(ECONNREFUSED\)/);
      expect(r.status, r.stderr).toBe(4);
      const heavy = heavyModules(r.modules);
      expect(heavy.get('@kubernetes/client-node (bundled)'), 'the bundled client was loaded').toHaveLength(1);
      expect(heavy.get('@kubernetes/client-node'), 'no file of the unbundled package was loaded').toBeUndefined();
      expect(
        r.modules.filter((m) => /\/node_modules\/(yargs|yargs-parser|cliui|y18n|cli-progress)\//.test(m)),
        'yargs loads as its bundled file (dist/src/cli/cli-library.js); cli-progress only when a bar is drawn',
      ).toEqual([]);
      expect(r.modules.filter((m) => m.startsWith('file:')).length).toBeLessThanOrEqual(CLUSTER_COMMAND_MODULE_BUDGET);
    });
  }
});
