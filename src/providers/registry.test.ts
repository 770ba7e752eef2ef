import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { emptyMapping, parseNodeMapping } from '../config/mapping.js';
import { RecordingIoHost, Reporter } from '../io/host.js';
import { builtinProviders, loadProvider, loadProviderModule, ProviderSet } from './registry.js';
import { chooseProvider, resolveNodes } from './resolve.js';
import type { NodeInfo } from '../provider-kit/types.js';

const ctx = { reporter: new Reporter(new RecordingIoHost()), config: {} };
const dir = mkdtempSync(path.join(tmpdir(), 'cnr-registry-'));
const write = (name: string, text: string) => {
  const p = path.join(dir, name);
  writeFileSync(p, text);
  return p;
};
const goodModule = `export default { apiVersion: 'cni-rewind.provider/v1', name: 'toy', create: () => ({ name: 'toy',
  resolve: async (n, m) => (m?.vm ? { node: n.name, provider: 'toy', machine: m.vm, location: {} } : undefined),
  snapshot: async () => [], waitUsable: async (r) => r, restoreDisks: async (t) => ({ node: t.node, restored: [], notes: [] }),
  reboot: async () => {}, list: async () => [], delete: async () => {} }) };`;

describe('provider registry', () => {
  it('knows the built-in providers by name, loaded lazily', () => {
    expect(Object.keys(builtinProviders).sort()).toEqual(['aws', 'azure', 'gcp', 'libvirt', 'proxmox', 'vsphere']);
  });

  it('loads a built-in provider module (aws) with the right apiVersion', async () => {
    const m = await loadProviderModule('aws');
    expect(m).toMatchObject({ apiVersion: 'cni-rewind.provider/v1', name: 'aws' });
  });

  it('loads a third-party module by path and validates it', async () => {
    const p = await loadProvider(write('good.mjs', goodModule), ctx);
    expect(p.name).toBe('toy');
  });

  it('names exactly what a bad module lacks', async () => {
    await expect(loadProvider(write('noversion.mjs', `export default { name: 'x', create() {} };`), ctx)).rejects.toThrow(/apiVersion is missing/);
    await expect(
      loadProvider(write('oldversion.mjs', `export default { apiVersion: 'cni-rewind.provider/v0', name: 'x', create() {} };`), ctx),
    ).rejects.toThrow(/apiVersion is 'cni-rewind.provider\/v0'/);
    await expect(loadProvider(write('nocreate.mjs', `export default { apiVersion: 'cni-rewind.provider/v1', name: 'x' };`), ctx)).rejects.toThrow(
      /create is missing/,
    );
    await expect(
      loadProvider(
        write('nomethods.mjs', `export default { apiVersion: 'cni-rewind.provider/v1', name: 'x', create: () => ({ name: 'x', resolve() {} }) };`),
        ctx,
      ),
    ).rejects.toThrow(/lacks snapshot, waitUsable, restoreDisks, list, delete/);
    await expect(loadProvider(path.join(dir, 'missing.mjs'), ctx)).rejects.toThrow(/not found/);
    await expect(loadProvider('nosuchprovider', ctx)).rejects.toThrow(/unknown provider 'nosuchprovider'/);
  });

  it('loads a provider without reboot: rebooting is an optional capability', async () => {
    const p = await loadProvider(write('noreboot.mjs', goodModule.replace('reboot: async () => {}, ', '')), ctx);
    expect(p.name).toBe('toy');
    expect(p.reboot).toBeUndefined();
  });

  it('a set never imports a name that is neither built in nor registered (names come from bundle manifests too)', async () => {
    const flag = `cnrPlanted${process.pid}`;
    const planted = write('planted.mjs', `globalThis.${flag} = true; ${goodModule}`);
    const set = new ProviderSet(() => ctx);
    for (const name of [planted, `data:text/javascript,globalThis.${flag}=true;export default {}`, 'nosuchprovider']) {
      await expect(set.get(name)).rejects.toThrow(`unknown provider '${name}'`);
    }
    expect((globalThis as Record<string, unknown>)[flag]).toBeUndefined();
  });

  it('accepts a named `provider` export', async () => {
    const p = await loadProvider(write('named.mjs', goodModule.replace('export default', 'export const provider =')), ctx);
    expect(p.name).toBe('toy');
  });
});

describe('node -> provider resolution', () => {
  const node = (name: string, providerID?: string): NodeInfo => ({ name, providerID, labels: {}, annotations: {} });
  const mapping = parseNodeMapping({ defaults: { provider: 'toy' }, nodes: { w1: { vm: 'vm-1' }, a1: { provider: 'toy', vm: 'vm-a' } } }, 'test');

  it('providerID first, mapping entry overrides it, defaults cover the rest, --provider forces', () => {
    expect(chooseProvider(node('x', 'aws:///us-east-1a/i-0abc'), emptyMapping()).provider).toBe('aws');
    expect(chooseProvider(node('x', 'gce://p/z/x'), emptyMapping()).provider).toBe('gcp');
    expect(chooseProvider(node('a1', 'aws:///us-east-1a/i-0abc'), mapping)).toMatchObject({ provider: 'toy', why: 'mapping file', entry: { vm: 'vm-a' } });
    expect(chooseProvider(node('w1'), mapping)).toMatchObject({ provider: 'toy', why: 'mapping defaults', entry: { provider: 'toy', vm: 'vm-1' } });
    expect(chooseProvider(node('bare'), emptyMapping()).provider).toBeUndefined();
    expect(chooseProvider(node('x', 'aws:///us-east-1a/i-0abc'), emptyMapping(), 'gcp').provider).toBe('gcp');
  });

  it('lists the nodes nothing can resolve, with the reason', async () => {
    const set = new ProviderSet(() => ctx);
    await set.addModule(write('toy.mjs', goodModule));
    const r = await resolveNodes([node('w1'), node('w2'), node('bare-1', 'openstack:///abc')], set, {
      mapping: parseNodeMapping({ nodes: { w1: { provider: 'toy', vm: 'vm-1' }, w2: { provider: 'toy' } } }, 't'),
    });
    expect(r.targets).toEqual([{ node: 'w1', provider: 'toy', machine: 'vm-1', location: {} }]);
    expect(r.unresolved.map((u) => u.node)).toEqual(['bare-1', 'w2']);
    expect(r.unresolved[0]!.reason).toMatch(/openstack:\/\/\/abc names no known provider/);
    expect(r.unresolved[1]!.reason).toMatch(/could not find its machine/);
  });
});
