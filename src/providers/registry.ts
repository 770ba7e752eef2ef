/**
 * Provider registry: built-in providers by name (loaded lazily, so a cloud SDK is only imported when its provider
 * is used and `cni-rewind --help` stays fast), and third-party providers by module path or package name
 * (`--provider-module`), validated against PROVIDER_API_VERSION before use.
 */
import { isAbsolute, resolve as resolvePath } from 'node:path';
import { pathToFileURL } from 'node:url';
import { BadInputError, EnvironmentError, errorMessage, isErrorKind } from '../core/errors.js';
import { PROVIDER_API_VERSION, type ProviderContext, type ProviderModule, type SnapshotProvider } from '../provider-kit/types.js';

/**
 * Built-in providers: name -> lazy import of `providers/<name>/index.js` (compiled next to dist/src/).
 * The specifiers are literal so bundlers and `tsc` see them; each module default-exports a ProviderModule.
 */
export const builtinProviders: Record<string, () => Promise<ProviderModule>> = {
  aws: async () => moduleExport(await import('../../providers/aws/index.js' as string), 'aws'),
  gcp: async () => moduleExport(await import('../../providers/gcp/index.js' as string), 'gcp'),
  libvirt: async () => moduleExport(await import('../../providers/libvirt/index.js' as string), 'libvirt'),
  proxmox: async () => moduleExport(await import('../../providers/proxmox/index.js' as string), 'proxmox'),
  vsphere: async () => moduleExport(await import('../../providers/vsphere/index.js' as string), 'vsphere'),
  azure: async () => moduleExport(await import('../../providers/azure/index.js' as string), 'azure'),
};

export function isBuiltinProvider(name: string): boolean {
  return Object.hasOwn(builtinProviders, name);
}

/** Pick the ProviderModule out of an imported ES/CommonJS module: `default`, a named `provider`, or the module itself. */
function moduleExport(mod: any, source: string): ProviderModule {
  const candidate = mod?.default?.create ? mod.default : mod?.provider?.create ? mod.provider : mod?.default?.default?.create ? mod.default.default : mod;
  return validateProviderModule(candidate, source);
}

/** Check a module's export has the provider contract; the error names exactly what is missing or wrong. */
export function validateProviderModule(candidate: unknown, source: string): ProviderModule {
  const m = candidate as Partial<ProviderModule> | undefined;
  const problems: string[] = [];
  if (!m || typeof m !== 'object') {
    throw new BadInputError(
      `provider module ${source} exports no provider (expected \`export default { apiVersion, name, create }\` or a named export \`provider\`)`,
    );
  }
  if (m.apiVersion === undefined) problems.push(`apiVersion is missing (expected '${PROVIDER_API_VERSION}')`);
  else if (m.apiVersion !== PROVIDER_API_VERSION) problems.push(`apiVersion is '${String(m.apiVersion)}', this cni-rewind supports '${PROVIDER_API_VERSION}'`);
  if (typeof m.name !== 'string' || !m.name) problems.push('name is missing (a non-empty string)');
  if (typeof m.create !== 'function') problems.push('create is missing (a function (ctx) => SnapshotProvider)');
  if (problems.length) throw new BadInputError(`provider module ${source} is not a valid cni-rewind provider: ${problems.join('; ')}`);
  return m as ProviderModule;
}

/** Methods every provider instance must have (checked so a broken plugin fails at load, not mid-backup). */
const REQUIRED_METHODS = ['resolve', 'snapshot', 'waitUsable', 'restoreDisks', 'list', 'delete'] as const;

function validateProviderInstance(p: unknown, source: string): SnapshotProvider {
  const inst = p as Record<string, unknown> | undefined;
  if (!inst || typeof inst !== 'object') throw new BadInputError(`provider ${source}: create() returned no provider object`);
  const missing = REQUIRED_METHODS.filter((k) => typeof inst[k] !== 'function');
  if (typeof inst.name !== 'string' || !inst.name) missing.unshift('name' as any);
  if (missing.length) throw new BadInputError(`provider ${source}: the provider object lacks ${missing.join(', ')}`);
  return p as SnapshotProvider;
}

/** Import a third-party module: a file path (relative to the working directory) or an installed package name. */
async function importThirdParty(spec: string): Promise<unknown> {
  const looksLikePath = spec.startsWith('.') || spec.startsWith('/') || isAbsolute(spec) || /\.(m?js|cjs)$/.test(spec);
  const target = looksLikePath ? pathToFileURL(resolvePath(spec)).href : spec;
  try {
    return await import(target);
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND' || code === 'ERR_UNSUPPORTED_DIR_IMPORT') {
      throw new BadInputError(`provider module ${spec} not found`, {
        hint: looksLikePath ? 'give the path of the compiled .js file' : 'install the package, or give a file path starting with ./ or /',
        cause: err,
      });
    }
    throw new BadInputError(`provider module ${spec} failed to load: ${errorMessage(err)}`, { cause: err });
  }
}

/** Load the module for a name (built-in) or module path/package (third-party), without creating a provider. */
export async function loadProviderModule(nameOrModulePath: string): Promise<ProviderModule> {
  if (isBuiltinProvider(nameOrModulePath)) {
    try {
      return await builtinProviders[nameOrModulePath]!();
    } catch (err) {
      if (isErrorKind(err, 'bad-input')) throw err;
      const code = (err as { code?: string }).code;
      if (code === 'ERR_MODULE_NOT_FOUND') throw new EnvironmentError(`built-in provider ${nameOrModulePath} is not available in this build`, { cause: err });
      throw err;
    }
  }
  if (/^[a-z0-9-]+$/.test(nameOrModulePath) && !nameOrModulePath.includes('/')) {
    // A bare word that is not a built-in: most likely a typo of a provider name, not a package.
    try {
      return moduleExport(await importThirdParty(nameOrModulePath), nameOrModulePath);
    } catch (err) {
      if (isErrorKind(err, 'bad-input') && /not found/.test(err.message)) {
        throw new BadInputError(`unknown provider '${nameOrModulePath}'`, {
          hint: `built-in providers: ${Object.keys(builtinProviders).join(', ')}; a third-party one is given with --provider-module PATH|PACKAGE`,
        });
      }
      throw err;
    }
  }
  return moduleExport(await importThirdParty(nameOrModulePath), nameOrModulePath);
}

/** Load and create a provider: built-ins by name, anything else as a module path/package validated against the API version. */
export async function loadProvider(nameOrModulePath: string, ctx: ProviderContext): Promise<SnapshotProvider> {
  const mod = await loadProviderModule(nameOrModulePath);
  const instance = await mod.create(ctx);
  return validateProviderInstance(instance, nameOrModulePath);
}

/**
 * A per-run cache of created providers (one instance per name), closed together at the end.
 * Third-party modules are registered under the module's declared `name` so mapping entries can refer to it.
 */
export class ProviderSet {
  private readonly instances = new Map<string, Promise<SnapshotProvider>>();
  private readonly extraModules = new Map<string, ProviderModule>();

  constructor(private readonly ctxFor: (name: string) => ProviderContext) {}

  /** Register a third-party module (from --provider-module); returns its declared name. */
  async addModule(spec: string): Promise<string> {
    const mod = await loadProviderModule(spec);
    this.extraModules.set(mod.name, mod);
    return mod.name;
  }

  /** Names this set can create: built-ins plus registered modules. */
  names(): string[] {
    return [...new Set([...Object.keys(builtinProviders), ...this.extraModules.keys()])];
  }

  has(name: string): boolean {
    return this.extraModules.has(name) || isBuiltinProvider(name);
  }

  /** Refuse a name this set cannot create (a typo on the command line, or anything a bundle or plan names). */
  assertKnown(name: string): void {
    if (this.has(name)) return;
    throw new BadInputError(`unknown provider '${name}'`, {
      hint: `built-in providers: ${this.names().join(', ')}; a third-party one is given with --provider-module`,
    });
  }

  /**
   * The provider of a built-in name or of a module registered from the command line or config. Any other name is
   * refused, never imported: names also come from bundle manifests, which anyone who can write the backups location
   * can plant (a `data:` URL or a `.mjs` beside the manifest would otherwise run as this process).
   */
  get(name: string): Promise<SnapshotProvider> {
    let p = this.instances.get(name);
    if (!p) {
      try {
        this.assertKnown(name);
      } catch (err) {
        return Promise.reject(err);
      }
      const extra = this.extraModules.get(name);
      p = extra ? Promise.resolve(extra.create(this.ctxFor(name))).then((i) => validateProviderInstance(i, name)) : loadProvider(name, this.ctxFor(name));
      this.instances.set(name, p);
      // A failed creation must not be cached for ever (the next call reports the same error freshly).
      p.catch(() => this.instances.delete(name));
    }
    return p;
  }

  async closeAll(): Promise<void> {
    const all = [...this.instances.values()];
    this.instances.clear();
    await Promise.all(all.map(async (p) => (await p.catch(() => undefined))?.close?.().catch(() => undefined)));
  }
}
