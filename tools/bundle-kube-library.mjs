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

await build({
  entryPoints: [path.join(root, 'src/kube/kube-library.ts')],
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
  plugins: [ownSourcesOnly],
  logLevel: 'warning',
});
