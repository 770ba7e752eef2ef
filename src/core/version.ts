import { readFileSync } from 'node:fs';
import { packageRoot } from './package-root.js';

let cached: string | undefined;
/** The tool version, from package.json (one source of truth). */
export function toolVersion(): string {
  if (!cached) cached = JSON.parse(readFileSync(`${packageRoot()}/package.json`, 'utf8')).version as string;
  return cached;
}
