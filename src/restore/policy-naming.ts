/**
 * Restore across Calico 3.32's policy naming (calico/policy-names.ts). A bundle stores a default-tier policy under
 * the name its own release used; the cluster it is restored into may run a release on the other side of 3.32:
 * - into 3.32+, a bundle's `default.<name>` written as it is would be renamed by kube-controllers' migrator, which
 *   keeps a `<name>` that exists ("already exists, carry on") and deletes the restored one: the bundle's content
 *   would be lost to the live policy while restore reported it written;
 * - below 3.32, a 3.32 bundle's `<name>` is listed but cannot be read, changed or deleted by name.
 * So restore writes each such policy under the name the live release stores it by. The live release is the one of
 * calico-kube-controllers (where the migrator runs), else the running operator's.
 */
import { calicoVersionForOperator, compareVersions, imageTag } from '../calico/knowledge.js';
import { kubeControllersReleases, policyNameFor } from '../calico/policy-names.js';
import type { KubeClient } from '../kube/client.js';
import { objRef, type KubeObject } from '../kube/types.js';

/** How many renames a summary line names; the rest are counted. */
const NAMED_IN_SUMMARY = 5;

/** The Calico release whose naming the live datastore follows; undefined when nothing running tells. */
export async function livePolicyNamingRelease(client: KubeClient, operatorImage: string | undefined): Promise<string | undefined> {
  const running = (await kubeControllersReleases(client)).map((r) => r.version).sort(compareVersions);
  // Two at once (a move between namespaces): the newer one's migrator, if any, is the one that renames.
  if (running.length) return running[running.length - 1];
  const tag = imageTag(operatorImage);
  return tag ? calicoVersionForOperator(tag) : undefined;
}

/** Renames a bundle's policies for the live release and keeps what it renamed, once per object. */
export class PolicyNaming {
  private readonly renamed = new Map<string, string>();

  constructor(
    readonly written: string | undefined,
    readonly live: string | undefined,
  ) {}

  /** `o` under the name the live release stores it by (a copy), or `o` itself. */
  named(o: KubeObject): KubeObject {
    const name = policyNameFor(o, this.written, this.live);
    if (!name) return o;
    this.renamed.set(objRef(o), name);
    return { ...o, metadata: { ...o.metadata, name } };
  }

  get count(): number {
    return this.renamed.size;
  }

  /** One line: how many, the first few `old -> new`, and why. Undefined when none was renamed. */
  summary(): string | undefined {
    if (!this.renamed.size) return undefined;
    const named = [...this.renamed].slice(0, NAMED_IN_SUMMARY).map(([ref, name]) => `${ref} -> ${name}`);
    const more = this.renamed.size > NAMED_IN_SUMMARY ? ` and ${this.renamed.size - NAMED_IN_SUMMARY} more` : '';
    return `${this.renamed.size} default-tier policy(ies) written under the names Calico ${this.live} stores them by (the bundle is of ${this.written ?? 'an unknown release'}): ${named.join(', ')}${more}`;
  }
}
