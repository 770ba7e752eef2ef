/**
 * The cni-rewind config file (examples/cni-rewind.yaml): provider settings and backup defaults.
 *
 *   providers:            # handed to each provider's create() as ctx.config (plain data, no secrets here:
 *     aws: { regions: [us-east-1], rootRestore: replace-root-task }   #  credentials come from each SDK's chain)
 *     gcp: { project: my-project, guestFlush: false }
 *   mapping: ./node-mapping.yaml   # relative to the config file
 *   backup: { concurrency: 16, snapshotTimeout: 30m }
 */
import { readInputText } from '../io/safe-file.js';
import path from 'node:path';
import yaml from 'js-yaml';
import { BadInputError, errorMessage } from '../core/errors.js';

export interface CniRewindConfig {
  providers: Record<string, Record<string, unknown>>;
  /** Absolute path of the node mapping file, when the config names one. */
  mapping?: string;
  backup: { concurrency?: number; snapshotTimeout?: string };
  /** Where the config came from (for messages). */
  source?: string;
}

export const emptyConfig = (): CniRewindConfig => ({ providers: {}, backup: {} });

export function parseConfig(doc: unknown, source: string): CniRewindConfig {
  if (doc === null || doc === undefined) return { ...emptyConfig(), source };
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new BadInputError(`${source}: the config file must be a YAML map`);
  const d = doc as Record<string, unknown>;
  const unknown = Object.keys(d).filter((k) => !['apiVersion', 'kind', 'providers', 'mapping', 'backup'].includes(k));
  if (unknown.length) throw new BadInputError(`${source}: unknown key(s) ${unknown.join(', ')} (expected providers, mapping, backup)`);
  const cfg: CniRewindConfig = { ...emptyConfig(), source };
  if (d.providers !== undefined) {
    if (!d.providers || typeof d.providers !== 'object' || Array.isArray(d.providers))
      throw new BadInputError(`${source}: 'providers' must map provider names to their settings`);
    for (const [name, v] of Object.entries(d.providers as Record<string, unknown>)) {
      if (v === null) cfg.providers[name] = {};
      else if (typeof v !== 'object' || Array.isArray(v)) throw new BadInputError(`${source}: providers.${name} must be a map of settings`);
      else cfg.providers[name] = v as Record<string, unknown>;
    }
  }
  if (d.mapping !== undefined) {
    if (typeof d.mapping !== 'string') throw new BadInputError(`${source}: 'mapping' must be a file path`);
    cfg.mapping = path.resolve(path.dirname(source), d.mapping);
  }
  if (d.backup !== undefined) {
    const b = d.backup as Record<string, unknown>;
    if (!b || typeof b !== 'object') throw new BadInputError(`${source}: 'backup' must be a map`);
    if (b.concurrency !== undefined && !(Number.isInteger(b.concurrency) && (b.concurrency as number) > 0))
      throw new BadInputError(`${source}: backup.concurrency must be a positive integer`);
    if (b.snapshotTimeout !== undefined) parseDuration(String(b.snapshotTimeout), `${source}: backup.snapshotTimeout`);
    cfg.backup = { concurrency: b.concurrency as number | undefined, snapshotTimeout: b.snapshotTimeout === undefined ? undefined : String(b.snapshotTimeout) };
  }
  return cfg;
}

export async function loadConfig(file: string): Promise<CniRewindConfig> {
  const abs = path.resolve(file);
  // Not readFile: a FIFO named as the config file would hang the command.
  const text = readInputText(abs, 'config file');
  let doc: unknown;
  try {
    doc = yaml.load(text);
  } catch (err) {
    throw new BadInputError(`config file ${file} is not valid YAML: ${errorMessage(err).split('\n')[0]}`);
  }
  return parseConfig(doc, abs);
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** `30m`, `90s`, `1h30m`, `7d` -> milliseconds; a bare number is seconds. */
export function parseDuration(text: string, what = 'duration'): number {
  const t = text.trim();
  if (/^\d+(\.\d+)?$/.test(t)) return Number(t) * 1000;
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h|d|w)/gy;
  let total = 0;
  let m: RegExpExecArray | null;
  let consumed = 0;
  while ((m = re.exec(t))) {
    total += Number(m[1]) * UNIT_MS[m[2]!]!;
    consumed = re.lastIndex;
  }
  if (!t || consumed !== t.length) throw new BadInputError(`${what}: '${text}' is not a duration (examples: 90s, 30m, 1h30m, 7d)`);
  return total;
}
