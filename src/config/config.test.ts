import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig, parseConfig, parseDuration } from './config.js';
import { loadNodeMapping, mappingEntryFor, parseNodeMapping } from './mapping.js';

const examples = path.join(import.meta.dirname, '..', '..', 'examples');

describe('config and node mapping files', () => {
  it('the shipped examples parse', async () => {
    const cfg = await loadConfig(path.join(examples, 'cni-rewind.yaml'));
    expect(cfg.providers.aws).toMatchObject({ rootRestore: 'replace-root-task' });
    expect(cfg.mapping).toBe(path.join(examples, 'node-mapping.yaml'));
    const m = await loadNodeMapping(cfg.mapping!);
    expect(mappingEntryFor(m, 'worker-1')).toEqual({ provider: 'libvirt', uri: 'qemu:///system', domain: 'k8s-worker-1' });
    expect(mappingEntryFor(m, 'worker-2')).toEqual({ provider: 'proxmox', node: 'pve1', vmid: 102 });
  });

  it('rejects malformed files with one clear line', () => {
    expect(() => parseConfig({ provders: {} }, 'c.yaml')).toThrow(/unknown key\(s\) provders/);
    expect(() => parseConfig({ backup: { concurrency: 0 } }, 'c.yaml')).toThrow(/positive integer/);
    expect(() => parseNodeMapping({ nodes: ['a'] }, 'm.yaml')).toThrow(/'nodes' must map node names/);
    expect(() => parseNodeMapping({ nodes: { a: { provider: 3 } } }, 'm.yaml')).toThrow(/nodes.a.provider/);
  });

  it('parses durations', () => {
    expect(parseDuration('30m')).toBe(1_800_000);
    expect(parseDuration('1h30m')).toBe(5_400_000);
    expect(parseDuration('7d')).toBe(604_800_000);
    expect(parseDuration('90')).toBe(90_000);
    expect(() => parseDuration('soon')).toThrow(/not a duration/);
    expect(() => parseDuration('5x')).toThrow(/not a duration/);
  });
});

describe('config and node mapping files that are not regular files', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-config-fifo-'));
  const fifo = path.join(dir, 'fifo.yaml');
  execFileSync('mkfifo', [fifo]);
  it('a FIFO as the config file or the node mapping file is refused at once, not waited on', { timeout: 3000 }, async () => {
    await expect(loadConfig(fifo)).rejects.toThrow(`cannot read config file ${fifo}: is not a regular file`);
    await expect(loadNodeMapping(fifo)).rejects.toThrow(`cannot read node mapping file ${fifo}: is not a regular file`);
  });
});
