import { describe, expect, it } from 'vitest';
import type { KubeClient } from '../../kube/client.js';
import type { SupervisorStatus } from './calico-supervisor.js';
import { installationPoolNames, nodeSideConditions, NotReadyError, waitUntilReady, type ReadinessCondition } from './readiness.js';

/** A condition that holds from its `n`th check on. */
function holdsFrom(name: string, n: number): ReadinessCondition & { checks: number } {
  const c = {
    name,
    checks: 0,
    async check() {
      c.checks++;
      return c.checks >= n ? undefined : `check ${c.checks}`;
    },
  };
  return c;
}

describe('waiting until the local cluster is usable', () => {
  it('returns once every condition holds in the same round, reporting what is missing after each round', async () => {
    const a = holdsFrom('API server', 1);
    const b = holdsFrom('APIService v3', 3);
    const rounds: string[][] = [];
    await waitUntilReady([a, b], { timeoutMs: 10_000, intervalMs: 1, onRound: (m) => rounds.push(m.map((x) => `${x.name}: ${x.seen}`)) });
    expect(rounds).toEqual([['APIService v3: check 1'], ['APIService v3: check 2'], []]);
    expect(a.checks).toBe(3);
  });

  it('a check that throws is not met; the timeout names every condition still missing and what it saw', async () => {
    const failing: ReadinessCondition = {
      name: 'TigeraStatus calico Available',
      check: async () => {
        throw new Error('connection refused');
      },
    };
    const err = await waitUntilReady([holdsFrom('API server', 1), failing, holdsFrom('pools', 1000)], { timeoutMs: 30, intervalMs: 5 }).catch((e) => e);
    expect(err).toBeInstanceOf(NotReadyError);
    expect(err.message).toMatch(/^not ready after 0 s: TigeraStatus calico Available \(connection refused\); pools \(check \d+\)$/);
  });

  it("names the Installation's pools as the operator does: its names, else the default of the family", () => {
    const inst = (pools: unknown[]) => ({
      apiVersion: 'operator.tigera.io/v1',
      kind: 'Installation',
      metadata: { name: 'default' },
      spec: { calicoNetwork: { ipPools: pools } },
    });
    expect(
      installationPoolNames(
        inst([
          { name: 'default-ipv4-ippool', cidr: '192.168.0.0/16' },
          { name: 'extra', cidr: '10.9.0.0/16' },
        ]),
      ),
    ).toEqual(['default-ipv4-ippool', 'extra']);
    expect(installationPoolNames(inst([{ cidr: '192.168.0.0/16' }, { cidr: 'fd00::/48' }]))).toEqual(['default-ipv4-ippool', 'default-ipv6-ippool']);
    expect(installationPoolNames(undefined)).toEqual([]);
  });
});

describe('the node side as a readiness condition', () => {
  const client = { listAll: async () => [{ metadata: { name: 'default-ipv4-ippool' } }] } as unknown as KubeClient;
  const status = (nodeSide: SupervisorStatus['nodeSide']) => () => ({ pid: 1, updatedAt: '', nodeSide }) as SupervisorStatus;

  it('holds once every node finished start-up and runs its allocator', async () => {
    const done = { startup: 'done', allocator: { pid: 42 } };
    expect(await nodeSideConditions(client, status({ nodes: { n1: done, n2: done }, pods: {} }))[0]!.check()).toBeUndefined();
  });

  it('names each node still starting, and an empty or unreported node side', async () => {
    const side = { nodes: { n1: { startup: 'done', allocator: { pid: 42 } }, n2: { startup: 'failed', error: 'no pool' } }, pods: {} };
    expect(await nodeSideConditions(client, status(side))[0]!.check()).toBe('n2: start-up failed (no pool)');
    expect(await nodeSideConditions(client, status({ nodes: {}, pods: {} }))[0]!.check()).toBe('no node runs a calico-node pod yet');
    expect(await nodeSideConditions(client, status(undefined))[0]!.check()).toBe('not reported yet');
  });

  it('wants a pool (calico-node creates the default one before 3.28 and with calico.yaml)', async () => {
    const none = { listAll: async () => [] } as unknown as KubeClient;
    expect(await nodeSideConditions(none, status(undefined))[1]!.check()).toBe('no IPPool');
    expect(await nodeSideConditions(client, status(undefined))[1]!.check()).toBeUndefined();
  });
});
