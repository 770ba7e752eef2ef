import os from 'node:os';
import path from 'node:path';

/** Where local clusters keep their state (PIDs, kubeconfig, etcd data). Outside the repository. */
export function stateRoot(): string {
  return process.env.CNI_REWIND_STATE_DIR ?? path.join(process.env.XDG_STATE_HOME ?? path.join(os.homedir(), '.local', 'state'), 'cni-rewind');
}

/** Where control-plane/build*.sh cache what they build (`CNI_REWIND_E2E_CACHE`, else ~/.cache/cni-rewind-e2e). */
export function buildCacheRoot(): string {
  return process.env.CNI_REWIND_E2E_CACHE ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'cni-rewind-e2e');
}

/** Every build appends `<end epoch s>\t<what>\t<seconds>` here, for the test run's closing table. */
export const buildTimesFile = (): string => path.join(buildCacheRoot(), 'build-times.tsv');
