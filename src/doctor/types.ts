import type { Release } from '../calico/release.js';
import type { CalicoState } from './state.js';

export type Severity = 'error' | 'warning' | 'info';

/** One problem doctor found: what, which objects, why it matters and the exact fix (docs/troubleshooting.md has each id). */
export interface Finding {
  /** Stable id, e.g. `pool-disabled-will-be-reenabled`; documented in docs/troubleshooting.md. */
  id: string;
  severity: Severity;
  title: string;
  /** Objects involved: `Kind/name` or `Kind/namespace/name` (addresses as `IP/<address>`). */
  objects: string[];
  why: string;
  fix: string;
}

/** The Calico version whose operator rules govern the pools: the `--target` release's, else the running operator's. */
export interface GoverningVersion {
  version: string;
  source: 'target' | 'installed';
}

export interface CheckContext {
  target?: Release;
  /** Calico version of the running operator (or of calico-node for a manifest install), when known. */
  installedVersion?: string;
  governing?: GoverningVersion;
}

/** A check: a pure function of the state. Registered as data in CHECKS (doctor.ts). */
export interface Check {
  /** Short name for reports of skipped checks. */
  name: string;
  run(state: CalicoState, ctx: CheckContext): Finding[];
}
