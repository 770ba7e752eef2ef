import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

/**
 * The network namespaces the local cluster makes (`ip netns`, as root): one per kwok node, where the CNI plugin
 * makes its host-side interfaces and routes, and one per pod. All of a cluster's names start with
 * netnsPrefix(cluster), so `down` finds and removes them all, and two clusters on one machine never share one.
 * A name is the prefix, then `n-` (a node) or `p-` (a pod) and hex digits: cluster `e2e`'s prefix is also the start of
 * every name of `e2e-2`..`e2e-N` (the parallel slots), so a name counts as the cluster's only when all of it fits.
 */
export function netnsPrefix(cluster: string): string {
  return `cnirw-${cluster}-`;
}

export function listNetns(prefix: string): string[] {
  let out: string;
  try {
    out = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  } catch {
    return []; // no iproute2, or no namespaces: nothing of ours
  }
  return out
    .split('\n')
    .map((l) => l.split(' ')[0]!)
    .filter((n) => n.startsWith(prefix) && /^[np]-[0-9a-f]+$/.test(n.slice(prefix.length)));
}

/**
 * Adds the namespace (with its loopback up) unless it exists; true when it made it. A process that ran in a namespace
 * of that name before it was removed still runs in the old one, which nothing can enter by the name any more.
 */
export function ensureNetns(name: string): boolean {
  const made = !existsSync(netnsPath(name));
  if (made) execFileSync('ip', ['netns', 'add', name], { stdio: 'ignore' });
  execFileSync('ip', ['-n', name, 'link', 'set', 'lo', 'up'], { stdio: 'ignore' });
  return made;
}

export function deleteNetns(name: string): void {
  try {
    execFileSync('ip', ['netns', 'delete', name], { stdio: 'ignore' });
  } catch {
    // already gone
  }
}

export const netnsPath = (name: string): string => `/var/run/netns/${name}`;
