import os from 'node:os';
import path from 'node:path';

/** Where local clusters keep their state (PIDs, kubeconfig, etcd data). Outside the repository. */
export function stateRoot(): string {
  return process.env.CNI_REWIND_STATE_DIR ?? path.join(process.env.XDG_STATE_HOME ?? path.join(os.homedir(), '.local', 'state'), 'cni-rewind');
}
