/**
 * Which modules a Node process loads: run it with `traceArgs(...)` in front of its script and read `tracedModules()`
 * afterwards. Two hooks, because Node 20 has two loaders: an ES module `resolve` hook (registered with
 * `module.register`) logs every URL an `import` resolves to, and a CommonJS preload logs every file in
 * `require.cache` when the process exits (CommonJS packages, also those reached through `import`).
 * Used by the start-up test (src/cli/startup.test.ts) and the start-up benchmark (bench/startup.ts).
 */
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

/** The heavy libraries the light commands must not load: the Kubernetes client (as a package or bundled), the cloud SDKs, the providers. */
export const HEAVY_MODULES: { name: string; pattern: RegExp }[] = [
  { name: '@kubernetes/client-node', pattern: /\/node_modules\/@kubernetes\/client-node\// },
  // The same library as `npm run build` bundles it into one file (tools/bundle-libraries.mjs).
  { name: '@kubernetes/client-node (bundled)', pattern: /\/dist\/src\/kube\/kube-library\.js$/ },
  { name: 'AWS SDK', pattern: /\/node_modules\/@(aws-sdk|smithy)\// },
  { name: 'Google Cloud SDK', pattern: /\/node_modules\/(@google-cloud\/|google-gax\/|googleapis\/)/ },
  { name: 'provider modules', pattern: /\/providers\/(aws|gcp|libvirt|proxmox|vsphere)\// },
];

/** The modules of `modules` that match HEAVY_MODULES, by library name. */
export function heavyModules(modules: readonly string[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const { name, pattern } of HEAVY_MODULES) {
    const hits = modules.filter((m) => pattern.test(m));
    if (hits.length) out.set(name, hits);
  }
  return out;
}

export interface ModuleTrace {
  /** Node options to put before the script. */
  nodeArgs: string[];
  /** Environment for the traced process (the log file). */
  env: Record<string, string>;
  /** Forget what was logged (before the next run). */
  reset(): void;
  /** Every module the traced process loaded (file URLs and `node:` builtins), without duplicates. */
  modules(): string[];
}

/** Write the hook files into `dir` (a temporary directory of the caller's). */
export function moduleTrace(dir: string): ModuleTrace {
  const log = path.join(dir, 'modules.log');
  const hooks = path.join(dir, 'esm-hooks.mjs');
  fs.writeFileSync(
    hooks,
    `import { appendFileSync } from 'node:fs';\n` +
      `export async function resolve(spec, ctx, next) {\n  const r = await next(spec, ctx);\n  if (process.env.CNR_MODULE_LOG) appendFileSync(process.env.CNR_MODULE_LOG, r.url + '\\n');\n  return r;\n}\n`,
  );
  const register = path.join(dir, 'register.mjs');
  fs.writeFileSync(register, `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`);
  const cjs = path.join(dir, 'cjs-trace.cjs');
  fs.writeFileSync(
    cjs,
    `const { appendFileSync } = require('node:fs');\nconst { pathToFileURL } = require('node:url');\n` +
      `process.on('exit', () => { if (process.env.CNR_MODULE_LOG) appendFileSync(process.env.CNR_MODULE_LOG, Object.keys(require.cache).map((f) => pathToFileURL(f).href + '\\n').join('')); });\n`,
  );
  return {
    nodeArgs: ['--require', cjs, '--import', pathToFileURL(register).href],
    env: { CNR_MODULE_LOG: log },
    reset: () => fs.rmSync(log, { force: true }),
    modules: () => [...new Set(fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').filter(Boolean) : [])],
  };
}
