/**
 * Where the test run keeps what it measured, outside the repository (beside the cached builds): each file's wall
 * time from the last runs (read by the duration sequencer to start the longest files first), the builds' times
 * (appended by control-plane/build*.sh), and when test/prereqs.sh started this run.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { buildCacheRoot, buildTimesFile } from '../../src/dev/local-cluster/paths.js';

export { buildCacheRoot };
export const measuredDurationsFile = (): string => path.join(buildCacheRoot(), 'test-file-durations.json');
export const prereqsStartedFile = (): string => path.join(buildCacheRoot(), 'test-run-started');

/** Per file (path from the repository root): wall milliseconds. The committed table, overlaid by the last run's. */
export function knownDurations(root: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const file of [path.join(root, 'test', 'file-durations.json'), measuredDurationsFile()]) {
    if (!existsSync(file)) continue;
    try {
      for (const [k, v] of Object.entries(JSON.parse(readFileSync(file, 'utf8')) as Record<string, number>)) if (typeof v === 'number') out.set(k, v);
    } catch {
      // a damaged table only costs the ordering
    }
  }
  return out;
}

export interface BuildTime {
  endedAt: number;
  what: string;
  seconds: number;
}

/** Builds that ended at or after `sinceMs` (lines `<end epoch s>\t<what>\t<seconds>`). */
export function buildsSince(sinceMs: number): BuildTime[] {
  if (!existsSync(buildTimesFile())) return [];
  const out: BuildTime[] = [];
  for (const line of readFileSync(buildTimesFile(), 'utf8').split('\n')) {
    const [end, what, secs] = line.split('\t');
    if (!end || !what || !secs) continue;
    const b = { endedAt: Number(end) * 1000, what, seconds: Number(secs) };
    if (b.endedAt >= sinceMs) out.push(b);
  }
  return out;
}

/** When test/prereqs.sh began this run (its builds count as this run's), else undefined. */
export function prereqsStartedAt(): number | undefined {
  try {
    const s = Number(readFileSync(prereqsStartedFile(), 'utf8').trim());
    return Number.isFinite(s) && s > 0 ? s * 1000 : undefined;
  } catch {
    return undefined;
  }
}
