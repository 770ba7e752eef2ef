/**
 * Build step (`npm run build`, after tsc): replace two of tsc's one-line re-exports with one bundled file each of
 * the library and the packages it imports: dist/src/kube/kube-library.js (@kubernetes/client-node's KubeConfig: a
 * command that talks to the cluster loads one file instead of about 900) and dist/src/cli/cli-library.js (yargs:
 * one file instead of about 40, for every command the help cache does not answer). docs/BENCHMARKS.md, start-up.
 * The source map beside each carries the sources (sourcesContent), so a stack trace and `npm pack`'s package
 * stay readable.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

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
 * of model classes, for makeApiClient) and node-fetch's Headers (for applyToFetchOptions).
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
          ? // Not globalThis.Headers: reading it makes Node load its fetch implementation (undici), 5 ms of every start.
            'export class Headers { constructor() { throw new Error("cni-rewind bundles KubeConfig without fetch support (applyToFetchOptions)"); } }'
          : 'const missing = () => { throw new Error("cni-rewind bundles KubeConfig without the generated API client (makeApiClient)"); };\n' +
            'export const createConfiguration = missing;\nexport class ServerConfiguration { constructor() { missing(); } }',
    }));
  },
};

/**
 * yargs finds its message catalogues (`locales/`) beside its own module file; bundled, that file is gone, so the
 * bundle looks them up where the installed package keeps them.
 */
const yargsLocalesFromPackage = {
  name: 'yargs-locales-from-package',
  setup(b) {
    b.onLoad({ filter: /[\\/]yargs[\\/]lib[\\/]platform-shims[\\/]esm\.mjs$/ }, async (args) => {
      const text = await fs.promises.readFile(args.path, 'utf8');
      const from = "resolve(__dirname, '../../../locales')";
      if (!text.includes(from)) throw new Error(`${args.path}: yargs no longer finds its locales as this build expects; update ${from}`);
      return { contents: text.replace(from, "resolve(dirname(require.resolve('yargs/package.json')), 'locales')"), loader: 'js' };
    });
  },
};

// The Kubernetes client's CommonJS dependencies call require() and read __dirname; an ES module has neither, so
// its bundle defines them for its own location. (yargs is made of ES modules, one of which declares both itself.)
const commonJsGlobals = [
  "import { createRequire as __cnrCreateRequire } from 'node:module';",
  "import { fileURLToPath as __cnrFileURLToPath } from 'node:url';",
  'const require = __cnrCreateRequire(import.meta.url);',
  'const __filename = __cnrFileURLToPath(import.meta.url);',
  "const __dirname = __cnrFileURLToPath(new URL('.', import.meta.url));",
].join('\n');

/** One bundled ES module in place of tsc's output for `sourcefile`, exporting what `contents` exports. */
async function bundleLibrary(sourcefile, contents, plugins, banner) {
  await build({
    stdin: { contents, resolveDir: root, sourcefile, loader: 'js' },
    outfile: path.join(root, 'dist', sourcefile.replace(/\.ts$/, '.js')),
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20.19',
    sourcemap: 'linked',
    sourcesContent: true,
    banner: banner ? { js: banner } : undefined,
    // ws loads these native speed-ups only when installed (in a try/catch); they are not dependencies here.
    external: ['bufferutil', 'utf-8-validate'],
    // Ahead of ownSourcesOnly, which would load every file of node_modules itself.
    plugins: [...plugins, ownSourcesOnly],
    logLevel: 'warning',
  });
}

// What src/kube/kube-library.ts exports, taken from the library's module that defines it rather than its index
// (which re-exports the whole generated API: watch, exec, port-forward and their dependencies).
await bundleLibrary(
  'src/kube/kube-library.ts',
  "export { KubeConfig } from '@kubernetes/client-node/dist/config.js';",
  [onlyWhatKubeConfigUses],
  commonJsGlobals,
);
await bundleLibrary('src/cli/cli-library.ts', "export { default as yargs } from 'yargs';\nexport { hideBin } from 'yargs/helpers';", [yargsLocalesFromPackage]);
