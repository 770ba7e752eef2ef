/** Writing one planned object (create, update, replace), and the API server's dry run of every write. */
import { KubeApiError, type KubeClient } from '../kube/client.js';
import { pool } from '../util/pool.js';
import type { ResourceResolver } from '../kube/resolver.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import type { Reporter } from '../io/host.js';
import { isIpamLive } from './ipam.js';
import { writeIpam } from './ipam-write.js';
import type { OwnerLookup } from './owners.js';
import { UPDATED_IN_PLACE, updatedInPlaceNote, whyNotDeleted } from './replace.js';
import type { PlanTable } from './plan-table.js';
import { desiredOf, hasDesired, type Planned, type RestoreActionKind } from './types.js';

/** Dry run: ask the API server whether each write would be accepted (strict field validation), writing nothing. */
export async function serverDryRun(client: KubeClient, planned: PlanTable, concurrency: number): Promise<void> {
  const writes = planned.where((i) => ['create', 'update', 'replace'].includes(planned.kindAt(i)) && planned.phaseAt(i) !== 'config');
  await pool(writes, concurrency, async (i) => {
    // Built for this check; kept with the server's answer when it refuses (plan-table.ts).
    const p = planned.get(i);
    if (!p.type || !hasDesired(p)) return;
    await dryRunOne(client, p);
    planned.set(i, p);
  });
}

async function dryRunOne(client: KubeClient, p: Planned): Promise<void> {
  // Objects whose CRD does not exist yet cannot be checked by the server; the schema check covered them.
  if (!p.live && p.action.action !== 'create') return;
  // Being deleted: a real run waits until it is gone and creates it then; the server cannot judge that now.
  if (p.action.deleting) return;
  try {
    const body = bodyFor(p, undefined);
    if (p.action.action === 'create') await client.create(p.type!, body, { dryRun: true, fieldValidation: 'Strict' });
    else
      await client.replace(
        p.type!,
        { ...body, metadata: { ...body.metadata, resourceVersion: p.live!.metadata.resourceVersion } },
        { dryRun: true, fieldValidation: 'Strict' },
      );
  } catch (err) {
    if (err instanceof KubeApiError && err.statusCode === 404) return; // CRD not installed yet
    if (err instanceof KubeApiError && err.statusCode >= 400 && err.statusCode < 500) p.action.serverDryRunError = err.message;
    else throw err;
  }
}

/**
 * The body to write: desired with ownerReferences re-linked to the owners' current UIDs (an owner that is
 * missing is dropped and listed in `dropped`). `ownerUids` undefined (dry run): references left as they are.
 */
function bodyFor(p: Planned, ownerUids: Map<string, string | undefined> | undefined, dropped?: string[], desired?: KubeObject): KubeObject {
  // desiredOf parses a fresh copy: re-linking changes it, never the plan. A copy parsed already is copied again
  // only when it has references to re-link (the caller keeps its own for the drift check).
  const body = desired && !desired.metadata.ownerReferences?.length ? desired : desiredOf(p);
  if (!body.metadata.ownerReferences?.length || !ownerUids) return body;
  const refs = body.metadata.ownerReferences;
  if (refs?.length) {
    const kept = [];
    for (const r of refs) {
      const uid = ownerUids.get(`${r.apiVersion}\0${r.kind}\0${r.name}`);
      if (uid) kept.push({ ...r, uid });
      else dropped?.push(`${r.kind} ${r.name}`);
    }
    if (kept.length) body.metadata.ownerReferences = kept;
    else delete body.metadata.ownerReferences;
  }
  return body;
}

/** The current UID of each owner `desired` names (undefined: not in the cluster now), keyed as `bodyFor` reads them. */
async function ownerUidsFor(owners: OwnerLookup, desired: KubeObject): Promise<Map<string, string | undefined>> {
  const out = new Map<string, string | undefined>();
  for (const r of desired.metadata.ownerReferences ?? []) out.set(`${r.apiVersion}\0${r.kind}\0${r.name}`, await owners.uidOf(r, desired.metadata.namespace));
  return out;
}

export async function writeOne(client: KubeClient, resolver: ResourceResolver, p: Planned, owners: OwnerLookup, reporter: Reporter): Promise<KubeObject> {
  const desired = desiredOf(p);
  const type = (await resolver.forObject(desired)) ?? p.type!;
  const ownerUids = await ownerUidsFor(owners, desired);
  const dropped: string[] = [];
  const body = bodyFor(p, ownerUids, dropped, desired);
  if (dropped.length) {
    const note = `ownerReferences to ${dropped.join(', ')} dropped: the owner does not exist in the cluster`;
    (p.action.notes ??= []).push(note);
    reporter.warn('CNR_RESTORE_OWNER_DROPPED', `${p.action.id}: ${note}`);
    // Planning kept only references to owners in the cluster or in the bundle: these are restored later.
    p.ownerPending = true;
  }
  // Kept for the drift check only when it differs from the plan's text (owner references re-linked or dropped).
  if (desired.metadata.ownerReferences?.length) p.written = body;
  const written = await send(client, type, p, body, owners);
  // What is written here may own what is written after it (an Installation its ConfigMaps): its new UID.
  if (written?.metadata?.uid) owners.remember(type, written);
  return written;
}

/** The request of a create, update or replace. */
async function send(client: KubeClient, type: ResourceType, p: Planned, body: KubeObject, owners: OwnerLookup): Promise<KubeObject> {
  const strict = { fieldValidation: 'Strict' as const };
  // Live state Calico keeps writing: merged, never overwritten with the bundle's copy (ipam-write.ts).
  if (isIpamLive(body)) return writeIpam(client, type, p.action, body);
  switch (p.action.action) {
    case 'create':
      try {
        return await client.create(type, body, strict);
      } catch (err) {
        if (!(err instanceof KubeApiError && err.conflict)) throw err;
        // Created meanwhile (by a controller): make it what the bundle says.
        const live = await client.get(type, body.metadata.namespace, body.metadata.name);
        return await client.replace(type, withLiveMeta(body, live), strict);
      }
    case 'update': {
      const live = await client.get(type, body.metadata.namespace, body.metadata.name);
      return await updateInPlace(client, type, p, body, live);
    }
    case 'replace': {
      // Planned without finalizers or dependents; one added since (a controller that is not paused) still keeps it.
      const live = await client.getOrUndefined(type, body.metadata.namespace, body.metadata.name);
      const kept = live && whyNotDeleted(live, await owners.dependentsOf(live, type));
      if (kept) {
        (p.action.notes ??= []).push(updatedInPlaceNote(kept));
        return await updateInPlace(client, type, p, body, live);
      }
      await client.delete(type, body.metadata.namespace, body.metadata.name);
      await client.waitFor(
        `${p.action.id} to be deleted`,
        async () => ((await client.getOrUndefined(type, body.metadata.namespace, body.metadata.name)) ? undefined : true),
        { timeoutMs: 60_000, intervalMs: 200 },
      );
      return await client.create(type, body, strict);
    }
    default:
      throw new Error(`not a write: ${p.action.action}`);
  }
}

/**
 * A PUT with the live resourceVersion. When it is the update a replace became (replace.ts) and the API server
 * refuses it (an immutable field), the object is not deleted either: the error says so and what to do instead.
 */
async function updateInPlace(client: KubeClient, type: ResourceType, p: Planned, body: KubeObject, live: KubeObject): Promise<KubeObject> {
  const inPlace = p.action.notes?.some((n) => n.startsWith(UPDATED_IN_PLACE));
  // A replace done in place keeps the live owners where the bundle names none, as it keeps the live finalizers.
  const keepOwners = inPlace && !body.metadata.ownerReferences?.length && live.metadata.ownerReferences?.length;
  const sent = withLiveMeta(keepOwners ? { ...body, metadata: { ...body.metadata, ownerReferences: live.metadata.ownerReferences } } : body, live);
  try {
    return await client.replace(type, sent, { fieldValidation: 'Strict' });
  } catch (err) {
    if (!(inPlace && err instanceof KubeApiError && err.statusCode === 422)) throw err;
    throw new Error(
      `refused: the API server does not accept the bundle's version as an update (${err.message}), and --existing replace does not delete an object with finalizers or dependents; change it by hand or delete it yourself once nothing depends on it, then restore again`,
      { cause: err },
    );
  }
}

/** An update keeps what the server and other controllers own in metadata (finalizers, owners we do not know of). */
function withLiveMeta(body: KubeObject, live: KubeObject): KubeObject {
  return {
    ...body,
    metadata: {
      ...body.metadata,
      resourceVersion: live.metadata.resourceVersion,
      ...(body.metadata.finalizers === undefined && live.metadata.finalizers ? { finalizers: live.metadata.finalizers } : {}),
    },
    // Status is not restored; keep the live one so a PUT to a CRD without a status subresource does not wipe it.
    ...(live.status !== undefined ? { status: live.status } : {}),
  };
}

export function pastTense(a: RestoreActionKind): string {
  return ({ create: 'created', update: 'updated', replace: 'replaced', prune: 'pruned', skip: 'skipped' } as Record<string, string>)[a] ?? a;
}
