import { execFileSync } from 'node:child_process';

/**
 * The network namespaces the local cluster makes (`ip netns`, as root): one per kwok node, where the CNI plugin
 * makes its host-side interfaces and routes, and one per pod. All of a cluster's names start with
 * netnsPrefix(cluster), so `down` finds and removes them all, and two clusters on one machine never share one.
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
    .filter((n) => n.startsWith(prefix));
}

/** Adds the namespace (with its loopback up) unless it exists. */
export function ensureNetns(name: string): void {
  if (!listNetns(name).includes(name)) execFileSync('ip', ['netns', 'add', name], { stdio: 'ignore' });
  execFileSync('ip', ['-n', name, 'link', 'set', 'lo', 'up'], { stdio: 'ignore' });
}

export function deleteNetns(name: string): void {
  try {
    execFileSync('ip', ['netns', 'delete', name], { stdio: 'ignore' });
  } catch {
    // already gone
  }
}

export const netnsPath = (name: string): string => `/var/run/netns/${name}`;
