/**
 * The step rename-policies-back (a downgrade from 3.32+ below 3.32): every default-tier policy 3.32 stored under its
 * v3 name `<name>` gets back the name releases before 3.32 read it by, `default.<name>` (calico/policy-names.ts).
 * It runs after the rollout, once the target's kube-controllers replaced 3.32's, whose migrator would rename them
 * again. Read live, never from the plan: one created between plan and apply is renamed too.
 *
 * Per policy, the migrator's own order in reverse: create `default.<name>` with the same labels, annotations (the
 * `projectcalico.org/metadata` one keeps the v3 name) and spec, then delete `<name>` with its uid and
 * resourceVersion as preconditions, so a write in between is copied again rather than lost. A copy that already
 * exists with the same content (a run stopped between the two writes) is kept and only the old one deleted; one
 * with other content is left alone with the original and named.
 */
import { CALICO_CRD_GROUP, compareVersions } from '../calico/knowledge.js';
import { kubeControllersReleases, nameBefore332, POLICY_NAMING_RELEASE, POLICY_PLURALS } from '../calico/policy-names.js';
import { RefusedError } from '../core/errors.js';
import { K } from '../kube/builtin.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import { crdResourceType } from '../kube/discovery.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import { canonicalJson } from '../util/canonical.js';

const WRITE_RETRIES = 5;

const ref = (p: KubeObject) => `${p.kind}/${p.metadata.namespace ? `${p.metadata.namespace}/` : ''}${p.metadata.name}`;

/** What must be equal for the copy to stand for the original. */
const content = (p: KubeObject) => canonicalJson({ labels: p.metadata.labels ?? {}, annotations: p.metadata.annotations ?? {}, spec: p.spec ?? {} });

function copyNamed(p: KubeObject, name: string): KubeObject {
  const { labels, annotations, ownerReferences, namespace } = p.metadata;
  return {
    apiVersion: p.apiVersion,
    kind: p.kind,
    metadata: {
      name,
      ...(namespace ? { namespace } : {}),
      ...(labels ? { labels } : {}),
      ...(annotations ? { annotations } : {}),
      ...(ownerReferences ? { ownerReferences } : {}),
    },
    spec: p.spec,
  };
}

/** Refuses while a kube-controllers of 3.32+ runs: its migrator would rename the policies straight back. */
async function refuseWhileMigratorRuns(client: KubeClient): Promise<void> {
  const newer = (await kubeControllersReleases(client)).find((r) => compareVersions(r.version, POLICY_NAMING_RELEASE) >= 0);
  if (newer)
    throw new RefusedError(
      `${newer.namespace}/calico-kube-controllers still runs ${newer.image}, whose policy name migrator would undo the renaming: wait for the rollout to finish, then run apply again with --resume`,
    );
}

/** Renames one policy back; returns what was done, or why not. */
async function renameOne(
  client: KubeClient,
  type: ResourceType,
  name: string,
  namespace: string | undefined,
  target: string,
): Promise<{ done?: string; refused?: string }> {
  for (let attempt = 1; ; attempt++) {
    const p = await client.getOrUndefined<KubeObject>(type, namespace, name);
    const newName = p && nameBefore332(p, target);
    if (!p || !newName) return {};
    if (p.metadata.finalizers?.length || p.metadata.deletionTimestamp)
      return { refused: `${ref(p)}: being deleted or has finalizers (${(p.metadata.finalizers ?? []).join(', ')}); not renamed` };
    const copy = await client.getOrUndefined<KubeObject>(type, namespace, newName);
    if (copy && content(copy) !== content(p))
      return { refused: `${ref(p)}: ${newName} exists too, with other labels, annotations or spec; both kept, choose one and delete the other` };
    let created: KubeObject | undefined;
    try {
      if (!copy) created = await client.create<KubeObject>(type, copyNamed(p, newName));
      await client.delete(type, namespace, name, { preconditions: { uid: p.metadata.uid, resourceVersion: p.metadata.resourceVersion } });
      return { done: `${ref(p)} -> ${newName}` };
    } catch (err) {
      // 409: the copy appeared (another writer) or the original was written in between. A copy this attempt made
      // from the version read is stale then and goes (only that one, by uid); the next attempt reads both again.
      if (!(err instanceof KubeApiError && err.conflict) || attempt >= WRITE_RETRIES) throw err;
      if (created) await client.delete(type, namespace, newName, { preconditions: { uid: created.metadata.uid } });
    }
  }
}

/**
 * How long the renames must hold before the step is done, and how often it renames again. A 3.32 migrator can
 * outlive its Deployment's change: an old pod still terminating, a controller swapped late. It renames such a
 * policy straight back within seconds of seeing it (seen once in the path matrix under load: 3.32.1 -> 3.31.7 ended
 * with the policy under its 3.32 name and apply reporting success). Two minutes of rounds: a pod's default grace
 * period is 30 s, and three rounds (30 s) were not enough under load (a rehearsal on 2026-12-07: 3.32.1 -> 3.31.7
 * stopped with "went back to 3.32's names 3 times"). Each round is safe to repeat (copy, then delete the original
 * under its uid and resourceVersion).
 */
const HOLD_MS = 10_000;
const ROUNDS = 12;

/** One pass over every policy kind: what was renamed, what could not be. */
async function renameRound(client: KubeClient, target: string): Promise<{ done: string[]; refused: string[] }> {
  const done: string[] = [];
  const refused: string[] = [];
  for (const plural of POLICY_PLURALS) {
    const def = await client.getOrUndefined<KubeObject>(K.crd, undefined, `${plural}.${CALICO_CRD_GROUP}`);
    if (!def) continue;
    const type = crdResourceType(def);
    for (const p of (await client.listAll<KubeObject>(type)).filter((o) => nameBefore332(o, target))) {
      const r = await renameOne(client, type, p.metadata.name!, p.metadata.namespace, target);
      if (r.done) done.push(r.done);
      if (r.refused) refused.push(r.refused);
    }
  }
  return { done, refused };
}

/**
 * Runs the step; returns its one-line summary. Refuses (after renaming every other one) when a policy could not be
 * renamed, and when renamed policies keep coming back under 3.32's names.
 */
export async function renamePoliciesBack(client: KubeClient, target: string, holdMs = HOLD_MS): Promise<string> {
  const done = new Set<string>();
  for (let round = 1; ; round++) {
    await refuseWhileMigratorRuns(client);
    const r = await renameRound(client, target);
    for (const d of r.done) done.add(d);
    if (r.refused.length)
      throw new RefusedError(`${r.refused.length} default-tier policy(ies) not renamed back (${done.size} renamed): ${r.refused.join('; ')}`);
    if (!r.done.length) break;
    if (round > ROUNDS)
      throw new RefusedError(
        `default-tier policies went back to 3.32's names ${ROUNDS} times after being renamed (${r.done.join(', ')}): a calico-kube-controllers of 3.32 (its policy name migrator) still runs somewhere; once none is left, run apply again with --resume`,
      );
    await new Promise((res) => setTimeout(res, holdMs));
  }
  return done.size ? `${done.size} default-tier policy(ies) renamed back for the target: ${[...done].join(', ')}` : 'no policy stored under 3.32 names';
}
