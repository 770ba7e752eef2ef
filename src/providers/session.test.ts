import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { RecordingIoHost, Reporter } from '../io/host.js';
import { loadProviderSettings, openProviders, withProviders } from './session.js';

const reporter = new Reporter(new RecordingIoHost());
const dir = mkdtempSync(path.join(tmpdir(), 'cnr-session-'));
const write = (name: string, text: string) => {
  const p = path.join(dir, name);
  writeFileSync(p, text);
  return p;
};

/** A provider that records, in a global the test reads, each close() and the config it was created with. */
const recording = (name: string) =>
  write(
    `${name}.mjs`,
    `const log = (globalThis.__cnrSessionLog ??= []);
export default { apiVersion: 'cni-rewind.provider/v1', name: '${name}', create: (ctx) => ({ name: '${name}', config: ctx.config,
  resolve: async () => undefined, snapshot: async () => [], waitUsable: async (r) => r, restoreDisks: async (t) => ({ node: t.node, restored: [], notes: [] }),
  reboot: async () => {}, list: async () => [], delete: async () => {}, close: async () => { log.push('closed ${name}'); } }) };`,
  );
const log = (): string[] => ((globalThis as any).__cnrSessionLog ??= []);

describe('provider sessions', () => {
  it('close every provider created when the work throws, and pass the error on', async () => {
    log().length = 0;
    const config = { providers: { one: { region: 'r1' } }, backup: {} };
    const err = await withProviders({ config, modules: [recording('one'), recording('two')] }, reporter, async (providers) => {
      expect(((await providers.get('one')) as any).config).toEqual({ region: 'r1' });
      await providers.get('two');
      throw new Error('listing failed');
    }).catch((e: unknown) => e);
    expect((err as Error).message).toBe('listing failed');
    expect(log().sort()).toEqual(['closed one', 'closed two']);
  });

  it('close them when the work succeeds too, and return its result', async () => {
    log().length = 0;
    const got = await withProviders(
      { config: { providers: {}, backup: {} }, modules: [recording('three')] },
      reporter,
      async (p) => (await p.get('three')).name,
    );
    expect(got).toBe('three');
    expect(log()).toEqual(['closed three']);
  });

  it('report each module loaded, and fail on a module that does not load', async () => {
    const seen: string[] = [];
    const config = { providers: {}, backup: {} };
    const set = await openProviders(
      { config, modules: [recording('four')], onModule: (spec, name) => seen.push(`${path.basename(spec)} -> ${name}`) },
      reporter,
    );
    await set.closeAll();
    expect(seen).toEqual(['four.mjs -> four']);
    await expect(openProviders({ config, modules: [path.join(dir, 'missing.mjs')] }, reporter)).rejects.toThrow(/not found/);
  });

  it('read the mapping file the config names, unless one is given', async () => {
    write('nodes.yaml', 'nodes:\n  w1: { provider: one, vm: vm-1 }\n');
    write('other.yaml', 'nodes:\n  w2: { provider: one, vm: vm-2 }\n');
    const cfg = write('cni-rewind.yaml', 'providers:\n  one: { region: r1 }\nmapping: nodes.yaml\n');
    const fromConfig = await loadProviderSettings({ config: cfg });
    expect(fromConfig.config.providers).toEqual({ one: { region: 'r1' } });
    expect(Object.keys(fromConfig.mapping.nodes)).toEqual(['w1']);
    expect(Object.keys((await loadProviderSettings({ config: cfg, mapping: path.join(dir, 'other.yaml') })).mapping.nodes)).toEqual(['w2']);
    expect(await loadProviderSettings({})).toMatchObject({ config: { providers: {} }, mapping: { nodes: {} } });
  });
});
