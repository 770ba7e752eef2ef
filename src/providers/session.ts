/**
 * A provider session: the provider settings (config file, node mapping file, third-party modules) turned into a
 * ProviderSet, and that set closed again however the work ends. Providers hold SDK clients, proxy agents and
 * sockets; one left open keeps the process alive after the command has answered, or leaks its connections.
 * Every command that talks to providers (backup, restore --disks, snapshots, prune --snapshots, the rolling
 * reboot of a plan) opens its set here, so they read the same settings the same way.
 */
import { emptyConfig, loadConfig, type CniRewindConfig } from '../config/config.js';
import { emptyMapping, loadNodeMapping, type NodeMapping } from '../config/mapping.js';
import type { Reporter } from '../io/host.js';
import { ProviderSet } from './registry.js';

export interface ProviderSettings {
  config: CniRewindConfig;
  mapping: NodeMapping;
}

/** The config file and the node mapping file named (the config file may name the mapping file too). */
export async function loadProviderSettings(files: { config?: string; mapping?: string }): Promise<ProviderSettings> {
  const config = files.config ? await loadConfig(files.config) : emptyConfig();
  const mappingFile = files.mapping ?? config.mapping;
  const mapping = mappingFile ? await loadNodeMapping(mappingFile) : emptyMapping();
  return { config, mapping };
}

/** A set that creates each provider with its own section of the config. Whoever creates it must close it. */
export function providerSetFor(config: CniRewindConfig, reporter: Reporter): ProviderSet {
  return new ProviderSet((name) => ({ reporter, config: config.providers[name] ?? {} }));
}

export interface OpenProvidersOptions {
  config: CniRewindConfig;
  /** Third-party provider modules (`--provider-module`), registered before the set is handed out. */
  modules?: readonly string[];
  /** Told each module registered and the provider name it declares. */
  onModule?: (spec: string, name: string) => void;
}

/** A set with the modules registered (closed again if one fails to load). The caller closes it: prefer withProviders. */
export async function openProviders(opts: OpenProvidersOptions, reporter: Reporter): Promise<ProviderSet> {
  const providers = providerSetFor(opts.config, reporter);
  try {
    for (const spec of opts.modules ?? []) {
      const name = await providers.addModule(spec);
      opts.onModule?.(spec, name);
    }
  } catch (err) {
    await providers.closeAll();
    throw err;
  }
  return providers;
}

/** Run `fn` with an open set and close every provider it created afterwards, also when `fn` throws. */
export async function withProviders<T>(opts: OpenProvidersOptions, reporter: Reporter, fn: (providers: ProviderSet) => Promise<T>): Promise<T> {
  const providers = await openProviders(opts, reporter);
  try {
    return await fn(providers);
  } finally {
    await providers.closeAll();
  }
}
