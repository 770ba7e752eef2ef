/**
 * Build step (`npm run build`, after tsc): replace dist/src/kube/kube-library.js, tsc's one-line re-export of
 * @kubernetes/client-node's KubeConfig, with one bundled file of the library and the packages it imports. A
 * command that talks to the cluster then loads one file instead of about 900 (docs/BENCHMARKS.md, start-up).
 * The source map beside it carries the sources (sourcesContent), so a stack trace and `npm pack`'s package
 * stay readable.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const outfile = path.join(root, 'dist/src/kube/kube-library.js');

/**
 * The packages' own source maps point at TypeScript sources they do not ship: followed, they would leave the map
 * with names of files nobody has and no text. Dropping the link makes the map point at the JavaScript that was
 * bundled, with its text inside.
 */
const ownSourcesOnly = {
  name: 'own-sources-only',
  setup(b) {
    b.onLoad({ filter: /[\\/]node_modules[\\/].*\.[cm]?js$/ }, async (args) => ({
      contents: (await fs.promises.readFile(args.path, 'utf8')).replace(/^\/\/# sourceMappingURL=.*$/gm, ''),
      loader: 'js',
    }));
  },
};

/**
 * KubeConfig's module imports two things only for methods cni-rewind never calls: the generated API (about 900 KiB
 * of model classes, for makeApiClient) and node-fetch's Headers (for applyToFetchOptions; Node has its own).
 * Loading them was a third of the client's start-up cost. The stand-ins say so if they are ever used.
 */
const onlyWhatKubeConfigUses = {
  name: 'only-what-kubeconfig-uses',
  setup(b) {
    const fromConfig = (args) => /client-node[\\/]dist[\\/]config\.js$/.test(args.importer);
    b.onResolve({ filter: /^\.\/gen\/index\.js$/ }, (args) => (fromConfig(args) ? { path: 'generated-api', namespace: 'stand-in' } : undefined));
    b.onResolve({ filter: /^node-fetch$/ }, (args) => (fromConfig(args) ? { path: 'node-fetch', namespace: 'stand-in' } : undefined));
    b.onLoad({ filter: /.*/, namespace: 'stand-in' }, (args) => ({
      loader: 'js',
      contents:
        args.path === 'node-fetch'
          ? 'export const Headers = globalThis.Headers;'
          : 'const missing = () => { throw new Error("cni-rewind bundles KubeConfig without the generated API client (makeApiClient)"); };\n' +
            'export const createConfiguration = missing;\nexport class ServerConfiguration { constructor() { missing(); } }',
    }));
  },
};

await build({
  // What src/kube/kube-library.ts exports, taken from the library's module that defines it rather than its index
  // (which re-exports the whole generated API: watch, exec, port-forward and their dependencies).
  stdin: {
    contents: "export { KubeConfig } from '@kubernetes/client-node/dist/config.js';",
    resolveDir: root,
    sourcefile: 'src/kube/kube-library.ts',
    loader: 'js',
  },
  outfile,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20.19',
  sourcemap: 'linked',
  sourcesContent: true,
  // The library's CommonJS dependencies call require() and read __dirname; an ES module has neither, so the
  // bundle defines them for its own location.
  banner: {
    js: [
      "import { createRequire as __cnrCreateRequire } from 'node:module';",
      "import { fileURLToPath as __cnrFileURLToPath } from 'node:url';",
      'const require = __cnrCreateRequire(import.meta.url);',
      'const __filename = __cnrFileURLToPath(import.meta.url);',
      "const __dirname = __cnrFileURLToPath(new URL('.', import.meta.url));",
    ].join('\n'),
  },
  // ws loads these native speed-ups only when installed (in a try/catch); they are not dependencies here.
  external: ['bufferutil', 'utf-8-validate'],
  plugins: [ownSourcesOnly, onlyWhatKubeConfigUses],
  logLevel: 'warning',
});
