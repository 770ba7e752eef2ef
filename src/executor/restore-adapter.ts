/**
 * Adapter to engine B's resource restore (src/restore/restore.ts, agreed API `restoreResources(client, bundle,
 * opts, reporter)`). Loaded lazily so that plan/apply/wrap build and run their other steps while that module is
 * being written; a missing module is reported as one clear error, never a silent skip.
 */
import type { Bundle } from '../bundle/reader.js';
import { EnvironmentError } from '../errors.js';
import type { Reporter } from '../io/host.js';
import type { KubeClient } from '../kube/client.js';

export interface RestoreOptions {
  dryRun?: boolean;
  existing?: 'skip' | 'update' | 'replace';
  prune?: boolean;
  dropUnknownFields?: boolean;
  allowOtherCluster?: boolean;
  kinds?: string[];
}

export async function restoreResources(client: KubeClient, bundle: Bundle, opts: RestoreOptions, reporter: Reporter): Promise<any> {
  const modulePath = '../restore/restore.js';
  let mod: any;
  try {
    mod = await import(modulePath);
  } catch (err) {
    throw new EnvironmentError(`resource restore is not available in this build (${(err as Error).message.split('\n')[0]})`);
  }
  return mod.restoreResources(client, bundle, opts, reporter);
}
