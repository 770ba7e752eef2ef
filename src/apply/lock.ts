/**
 * A cluster-side lock (a coordination.k8s.io Lease in kube-system) so that two `apply` runs never work on one
 * cluster at once. The holder renews it while it runs; a lease whose renewals stopped (or, on this host, whose
 * holder process is gone) is stale: reported with its holder and age, taken over by `--resume` of the same plan,
 * or broken with `--break-lock`.
 */
import os from 'node:os';
import { EnvironmentError, errorMessage, RefusedError } from '../core/errors.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import { K } from '../kube/builtin.js';
import type { KubeObject } from '../kube/types.js';

export const LOCK_NAMESPACE = 'kube-system';
export const LOCK_NAME = 'cni-rewind-apply';
const LEASE_SECONDS = 60;
const RENEW_MS = 15_000;

export interface LockHolder {
  identity: string;
  host?: string;
  pid?: number;
  planId?: string;
  acquiredAt?: string;
  renewedAt?: string;
  ageSeconds?: number;
  stale: boolean;
}

export interface AcquireOptions {
  planId: string;
  /** Take over a stale lock left by an earlier run of the same plan. */
  resume?: boolean;
  /** Take over any lock, live or stale. */
  breakLock?: boolean;
}

function identity(planId: string): string {
  return `${os.hostname()}/${process.pid}/${planId}`;
}

function parseHolder(lease: KubeObject | undefined, now = Date.now()): LockHolder | undefined {
  const id: string | undefined = lease?.spec?.holderIdentity;
  if (!id) return undefined;
  const [host, pid, planId] = id.split('/');
  const renewed = lease!.spec.renewTime ?? lease!.spec.acquireTime;
  const renewedMs = renewed ? Date.parse(renewed) : 0;
  const duration = (lease!.spec.leaseDurationSeconds ?? LEASE_SECONDS) * 1000;
  let stale = now - renewedMs > duration;
  // On this host we can tell for sure whether the holder still runs, both ways: a holder that missed renewals
  // during an API server outage but is still working must not be taken over by a --resume started meanwhile.
  if (host === os.hostname() && pid) stale = !processAlive(Number(pid));
  const acquired = lease!.spec.acquireTime;
  return {
    identity: id,
    host,
    pid: pid ? Number(pid) : undefined,
    planId,
    acquiredAt: acquired,
    renewedAt: renewed,
    ageSeconds: acquired ? Math.round((now - Date.parse(acquired)) / 1000) : undefined,
    stale,
  };
}

function processAlive(pid: number): boolean {
  if (!Number.isFinite(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const micro = (d = new Date()) => d.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');

export function describeHolder(h: LockHolder): string {
  return `${h.identity}${h.ageSeconds !== undefined ? `, held for ${h.ageSeconds}s` : ''}${h.renewedAt ? `, last renewed ${h.renewedAt}` : ''}`;
}

/** The lock can no longer be trusted to be this run's: apply must stop before its next step (exit 4). */
export class LockLostError extends EnvironmentError {}

export class ApplyLock {
  private timer?: NodeJS.Timeout;
  private released = false;
  /** When the lease was last seen held by us (acquired, renewed). */
  private heldAt = Date.now();
  private lostReason?: string;

  private constructor(
    private readonly client: KubeClient,
    readonly identity: string,
    /** The holder we replaced, if we took over a stale or broken lock. */
    readonly tookOver?: LockHolder,
  ) {}

  /** Who holds the lock now, if anyone. */
  static async holder(client: KubeClient): Promise<LockHolder | undefined> {
    return parseHolder(await client.getOrUndefined(K.lease, LOCK_NAMESPACE, LOCK_NAME));
  }

  static async acquire(client: KubeClient, opts: AcquireOptions): Promise<ApplyLock> {
    const me = identity(opts.planId);
    for (let attempt = 0; attempt < 5; attempt++) {
      const lease = await client.getOrUndefined(K.lease, LOCK_NAMESPACE, LOCK_NAME);
      const now = new Date();
      const spec = { holderIdentity: me, leaseDurationSeconds: LEASE_SECONDS, acquireTime: micro(now), renewTime: micro(now) };
      try {
        if (!lease) {
          await client.create(K.lease, { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: LOCK_NAME, namespace: LOCK_NAMESPACE }, spec });
          return new ApplyLock(client, me).startRenewing();
        }
        const held = parseHolder(lease);
        if (held) {
          const sameRun = held.planId === opts.planId;
          const allowed = opts.breakLock || (held.stale && opts.resume && sameRun);
          if (!allowed) {
            if (held.stale) {
              throw new RefusedError(`a stale apply lock is held by ${describeHolder(held)} (the run stopped without releasing it)`, {
                hint: sameRun
                  ? 'continue that run with: cni-rewind apply PLAN --resume'
                  : 'if no other apply runs against this cluster: rerun with --break-lock',
              });
            }
            throw new RefusedError(`another apply is running against this cluster: lock held by ${describeHolder(held)}`, {
              hint: 'wait for it to finish; if it is gone for good, rerun with --break-lock',
            });
          }
        }
        await client.replace(K.lease, { ...lease, spec: { ...lease.spec, ...spec } });
        return new ApplyLock(client, me, held).startRenewing();
      } catch (err) {
        // Someone else created or updated the lease between our read and write: read again.
        if (err instanceof KubeApiError && err.conflict) continue;
        throw err;
      }
    }
    throw new RefusedError('could not take the apply lock: it keeps changing hands');
  }

  private startRenewing(): this {
    this.timer = setInterval(() => {
      void this.renew();
    }, RENEW_MS);
    this.timer.unref();
    return this;
  }

  /**
   * Renew the lease. A lease now held by someone else (or deleted), a renewal the server refuses (401 after the
   * credentials were refreshed, 403), or renewals failing for longer than the lease lasts (another run may then
   * take it as stale) mark the lock lost; `check()` reports it at the next safe point.
   */
  async renew(): Promise<void> {
    if (this.released || this.lostReason) return;
    try {
      const lease = await this.client.getOrUndefined(K.lease, LOCK_NAMESPACE, LOCK_NAME);
      if (!lease?.spec?.holderIdentity) return this.lose('the lease was deleted or released by someone else');
      if (lease.spec.holderIdentity !== this.identity) return this.lose(`the lease is now held by ${lease.spec.holderIdentity}`);
      await this.client.replace(K.lease, { ...lease, spec: { ...lease.spec, renewTime: micro() } });
      this.heldAt = Date.now();
    } catch (err) {
      // Written by someone else between our read and write: the next renewal reads who holds it now.
      if (err instanceof KubeApiError && err.conflict) return;
      if (err instanceof KubeApiError && (err.statusCode === 401 || err.statusCode === 403)) return this.lose(`renewing it was refused: ${errorMessage(err)}`);
      if (Date.now() - this.heldAt > LEASE_SECONDS * 1000)
        return this.lose(`it could not be renewed for longer than its ${LEASE_SECONDS} s lease: ${errorMessage(err)}`);
    }
  }

  private lose(reason: string): void {
    this.lostReason = reason;
    if (this.timer) clearInterval(this.timer);
  }

  /** At a safe point (between steps): renew now, and throw LockLostError if the lock is no longer this run's. */
  async check(): Promise<void> {
    await this.renew();
    if (this.lostReason) {
      throw new LockLostError(`the apply lock was lost (${this.lostReason}); stopped so that no two runs change the cluster at once`, {
        hint: 'make sure no other apply runs against this cluster, then continue with --resume (--break-lock if the lease is still held)',
      });
    }
  }

  /** Give the lock back (only if we still hold it). */
  async release(): Promise<void> {
    this.released = true;
    if (this.timer) clearInterval(this.timer);
    const lease = await this.client.getOrUndefined(K.lease, LOCK_NAMESPACE, LOCK_NAME);
    if (!lease || lease.spec?.holderIdentity !== this.identity) return;
    try {
      await this.client.replace(K.lease, { ...lease, spec: { leaseDurationSeconds: LEASE_SECONDS } });
    } catch (err) {
      if (!(err instanceof KubeApiError && (err.conflict || err.notFound))) throw err;
    }
  }
}
