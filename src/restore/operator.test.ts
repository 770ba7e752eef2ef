import { describe, expect, it } from 'vitest';
import { isErrorKind } from '../core/errors.js';
import { RecordingIoHost, Reporter } from '../io/host.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import type { KubeObject, ResourceType } from '../kube/types.js';
import {
  availableReports,
  deletionsInProgress,
  judgeOperator,
  calicoNamespaceDeletions,
  reinstallOperatorHint,
  settleDeletions,
  unregisterStaleCalicoApi,
  writeTeardownNeeds,
} from './operator.js';
import type { RestoreSource } from './types.js';

const status = (name: string, available: string, at = '2026-01-01T00:00:00Z'): KubeObject => ({
  apiVersion: 'operator.tigera.io/v1',
  kind: 'TigeraStatus',
  metadata: { name },
  status: { conditions: [{ type: 'Available', status: available, lastTransitionTime: at }] },
});
const crd = (name: string, group: string, deleting: boolean): KubeObject => ({
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name, ...(deleting ? { deletionTimestamp: '2026-01-01T00:00:00Z', finalizers: ['customresourcecleanup.apiextensions.k8s.io'] } : {}) },
  spec: { group, names: { plural: name.split('.')[0], kind: 'Installation' }, scope: 'Cluster', versions: [{ name: 'v1', storage: true }] },
});

/** Objects held by the operator's finalizers, nothing awaiting the garbage collector. */
const heldByOperator = (deleting: string[]) => ({ deleting, awaitingCollection: [] });

/** A cluster as a function of the poll count: `objects(n)` answers every read of the n-th poll. */
function fakeClient(objects: (poll: number) => Record<string, KubeObject[]>): { client: KubeClient; polls: () => number } {
  let n = 0;
  const read = (t: ResourceType) => objects(n)[t.plural] ?? [];
  const client = {
    listAll: async (t: ResourceType) => {
      if (t.plural === 'customresourcedefinitions') n++;
      return read(t);
    },
    getOrUndefined: async (t: ResourceType, _ns: string | undefined, name: string) => read(t).find((o) => o.metadata.name === name),
  } as unknown as KubeClient;
  return { client, polls: () => n };
}

describe('restore and a running tigera operator', () => {
  it('expects again only the reports that were Available in the bundle', () => {
    expect(availableReports([status('calico', 'True'), status('ippools', 'False'), status('apiserver', 'True')])).toEqual(['apiserver', 'calico']);
  });

  it('does not expect the ippools report from an operator without an IP pool controller (v1.32, Calico 3.27)', () => {
    const bundle = [status('calico', 'True'), status('ippools', 'True'), status('apiserver', 'True')];
    expect(availableReports(bundle, 'quay.io/tigera/operator:v1.32.10')).toEqual(['apiserver', 'calico']);
    expect(availableReports(bundle, 'quay.io/tigera/operator:v1.34.3')).toEqual(['apiserver', 'calico', 'ippools']);
    expect(availableReports(bundle, undefined)).toEqual(['apiserver', 'calico', 'ippools']);
  });

  it('does not expect the reports only a newer operator writes: a 3.30 bundle restored under the 3.29 operator (v1.36)', () => {
    const bundle = ['calico', 'apiserver', 'ippools', 'whisker', 'goldmane'].map((n) => status(n, 'True'));
    expect(availableReports(bundle, 'quay.io/tigera/operator:v1.36.16')).toEqual(['apiserver', 'calico', 'ippools']);
    expect(availableReports(bundle, 'quay.io/tigera/operator:v1.38.13')).toEqual(['apiserver', 'calico', 'goldmane', 'ippools', 'whisker']);
  });

  it('names the Calico CRDs and planned objects being deleted', () => {
    const actions = [
      {
        ref: { apiVersion: 'operator.tigera.io/v1', kind: 'Installation', name: 'default' },
        id: 'Installation default',
        phase: 'operator',
        action: 'create' as const,
        deleting: true,
      },
      { ref: { apiVersion: 'crd.projectcalico.org/v1', kind: 'IPPool', name: 'p' }, id: 'IPPool p', phase: 'ip-pools', action: 'unchanged' as const },
    ];
    expect(
      deletionsInProgress([crd('installations.operator.tigera.io', 'operator.tigera.io', true), crd('x.example.com', 'example.com', true)], actions),
    ).toEqual(['CustomResourceDefinition installations.operator.tigera.io', 'Installation default']);
  });

  it('waits for a teardown to finish after creating the missing CRDs, and refuses (exit 5) when it does not', async () => {
    const held = { apiVersion: 'operator.tigera.io/v1', kind: 'Installation', metadata: { name: 'default', finalizers: ['tigera.io/operator-cleanup'] } };
    const operator = { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'tigera-operator' }, spec: { replicas: 1 } };
    const order: string[] = [];
    const finishing = fakeClient((n) => ({
      customresourcedefinitions: n < 3 ? [crd('installations.operator.tigera.io', 'operator.tigera.io', true)] : [],
      installations: n < 3 ? [held] : [],
      deployments: [operator],
    }));
    const reporter = new Reporter(new RecordingIoHost());
    await settleDeletions(
      finishing.client,
      heldByOperator(['Installation default']),
      async () => void order.push(`crds at poll ${finishing.polls()}`),
      reporter,
      30_000,
    );
    expect(order).toEqual(['crds at poll 0']);
    expect(finishing.polls()).toBe(3);

    const stuck = fakeClient(() => ({
      customresourcedefinitions: [crd('installations.operator.tigera.io', 'operator.tigera.io', true)],
      installations: [held],
      deployments: [operator],
    }));
    const err = await settleDeletions(stuck.client, heldByOperator(['Installation default']), async () => undefined, reporter, 1500).catch((e) => e);
    expect(isErrorKind(err, 'refused')).toBe(true);
    expect(err.message).toMatch(/still being deleted after 2 s: .*Installation default \(finalizers tigera.io\/operator-cleanup\)/);
    expect(err.hint).toMatch(/the tigera operator removes its finalizers when its teardown completes/);
    expect(err.hint).toMatch(/doctor. says so \(namespace-owner-gone\) and restarting kube-controller-manager/);
  });

  it('waits until the garbage collector has deleted a Calico namespace whose owner Installation is gone, before anything is written into it', async () => {
    const owned = (uid: string): KubeObject => ({
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: 'calico-system', ownerReferences: [{ apiVersion: 'operator.tigera.io/v1', kind: 'Installation', name: 'default', uid }] },
    });
    const inst = (uid: string): KubeObject => ({ apiVersion: 'operator.tigera.io/v1', kind: 'Installation', metadata: { name: 'default', uid } });
    // Same owner: nothing to wait for. Owner gone, or another Installation of that name: the collector deletes it.
    const awaiting = async (state: Record<string, KubeObject[]>) => (await calicoNamespaceDeletions(fakeClient(() => state).client)).awaitingCollection;
    expect(await awaiting({ namespaces: [owned('u1')], installations: [inst('u1')] })).toEqual([]);
    const gone = { deleting: [], awaitingCollection: ['Namespace calico-system (its owner Installation default is gone)'] };
    expect(await awaiting({ namespaces: [owned('u1')] })).toEqual(gone.awaitingCollection);
    expect(await awaiting({ namespaces: [owned('u1')], installations: [inst('u2')] })).toEqual(gone.awaitingCollection);

    // The teardown is over (no CRD deleting) but calico-system is still there for two polls, then goes: no operator
    // is needed for that, and settling returns only once it is gone.
    const collecting = fakeClient((n) => ({ namespaces: n < 3 ? [owned('u1')] : [] }));
    const host = new RecordingIoHost();
    await settleDeletions(collecting.client, gone, async () => undefined, new Reporter(host), 30_000);
    expect(collecting.polls()).toBe(3);
    expect(host.codes()).toEqual(['CNR_RESTORE_WAIT_DELETION']);

    const never = fakeClient(() => ({ namespaces: [owned('u1')] }));
    const err = await settleDeletions(never.client, gone, async () => undefined, new Reporter(new RecordingIoHost()), 1500).catch((e) => e);
    expect(isErrorKind(err, 'refused')).toBe(true);
    expect(err.message).toMatch(/still being deleted after 2 s: Namespace calico-system \(its owner Installation default is gone/);
    expect(err.hint).toMatch(/garbage collector deletes objects whose owner is gone/);
  });

  it('refuses at once, writing nothing, when the operator that holds the finalizers is not installed any more, naming the commands that install it', async () => {
    const gone = fakeClient(() => ({
      customresourcedefinitions: [crd('installations.operator.tigera.io', 'operator.tigera.io', true)],
      installations: [{ apiVersion: 'operator.tigera.io/v1', kind: 'Installation', metadata: { name: 'default', finalizers: ['tigera.io/operator-cleanup'] } }],
    }));
    let prepared = false;
    const started = Date.now();
    const prepare = async () => void (prepared = true);
    const err = await settleDeletions(
      gone.client,
      heldByOperator(['Installation default']),
      prepare,
      new Reporter(new RecordingIoHost()),
      30_000,
      'v3.28.1',
    ).catch((e) => e);
    expect(isErrorKind(err, 'refused')).toBe(true);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(prepared).toBe(false);
    expect(err.message).toMatch(/the operator is not installed .*nothing was written/);
    expect(err.hint).toBe(
      'install the tigera operator again: kubectl apply --server-side --force-conflicts -f https://raw.githubusercontent.com/projectcalico/calico/v3.28.1/manifests/tigera-operator.yaml; it finishes the teardown, then restore again',
    );
    expect(reinstallOperatorHint('3.30.7')).toMatch(
      /manifests\/operator-crds\.yaml && kubectl apply --server-side --force-conflicts -f .*v3\.30\.7\/manifests\/tigera-operator\.yaml;/,
    );
  });

  it('judges the resumed operator by its own reports: a missing one is waited for, one that never comes makes the restore partial', async () => {
    let reads = 0;
    const calls = fakeClient(() => {
      reads++;
      return {
        installations: [{ apiVersion: 'operator.tigera.io/v1', kind: 'Installation', metadata: { name: 'default' } }],
        tigerastatuses: reads > 4 ? [status('calico', 'True')] : [],
        daemonsets: reads > 4 ? [{ apiVersion: 'apps/v1', kind: 'DaemonSet', metadata: { name: 'calico-node' } }] : [],
      };
    });
    const host = new RecordingIoHost();
    const ok = await judgeOperator(calls.client, ['calico'], true, new Reporter(host), 30_000);
    expect(ok).toEqual({
      checked: ['Installation default not being deleted', 'TigeraStatus calico Available (reported after the operator resumed)', 'calico-node rendered'],
    });
    expect(host.codes()).toEqual(['CNR_RESTORE_OPERATOR_READY']);

    const never = fakeClient(() => ({
      installations: [{ apiVersion: 'operator.tigera.io/v1', kind: 'Installation', metadata: { name: 'default', deletionTimestamp: 't' } }],
    }));
    const bad = await judgeOperator(never.client, ['calico'], true, new Reporter(new RecordingIoHost()), 1000);
    expect(bad.problem).toMatch(
      /did not report Calico ready within 1 s: Installation default is being deleted; TigeraStatus calico not reported yet; calico-node not rendered/,
    );
  });

  it('waits for no report when there is no Installation for the operator to act on (the restore did not write it)', async () => {
    const none = fakeClient(() => ({}));
    const host = new RecordingIoHost();
    const started = Date.now();
    expect(await judgeOperator(none.client, ['calico'], false, new Reporter(host), 5000)).toEqual({ checked: [] });
    expect(Date.now() - started).toBeLessThan(4000);
    expect(host.codes()).toEqual([]);
  });

  it('gives a teardown the bundle IPAM the cluster lacks (blocks, handles, affinities) before its pools, never over what exists (issue 29)', async () => {
    const obj = (kind: string, name: string, spec: object = {}): KubeObject => ({ apiVersion: 'crd.projectcalico.org/v1', kind, metadata: { name }, spec });
    // 192.168.1.0: pod-a (runs), the node's tunnel address (named by its Node), pod-gone (deleted by the teardown).
    const attrs = (...h: string[]) => h.map((handle_id) => ({ handle_id }));
    const objects = [
      obj('IPPool', 'default-ipv4-ippool', { cidr: '192.168.0.0/16' }),
      obj('BlockAffinity', 'n1-a', { node: 'n1', cidr: '192.168.1.0/26' }),
      obj('BlockAffinity', 'n2-b', { node: 'n2', cidr: '192.168.2.0/26' }),
      obj('IPAMHandle', 'k8s-pod-network.a', { handleID: 'k8s-pod-network.a', block: { '192.168.1.0/26': 1 } }),
      obj('IPAMHandle', 'k8s-pod-network.gone', { handleID: 'k8s-pod-network.gone', block: { '192.168.1.0/26': 1 } }),
      obj('IPAMHandle', 'vxlan-tunnel-addr-n1', { handleID: 'vxlan-tunnel-addr-n1', block: { '192.168.1.0/26': 1 } }),
      obj('IPAMHandle', 'k8s-pod-network.b', { handleID: 'k8s-pod-network.b', block: { '192.168.2.0/26': 1 } }),
      obj('IPAMBlock', '192-168-1-0-26', {
        cidr: '192.168.1.0/26',
        allocations: [0, 1, 2],
        attributes: attrs('vxlan-tunnel-addr-n1', 'k8s-pod-network.a', 'k8s-pod-network.gone'),
        unallocated: [],
      }),
      obj('IPAMBlock', '192-168-2-0-26', { cidr: '192.168.2.0/26', allocations: [0], attributes: attrs('k8s-pod-network.b'), unallocated: [] }),
      obj('ClusterInformation', 'default', { datastoreReady: true }),
    ];
    const bundle = {
      async *objects(f: { kinds?: string[] }) {
        for (const o of objects) if (!f.kinds || f.kinds.includes(o.kind)) yield { object: o };
      },
    } as unknown as RestoreSource;
    const creates: string[] = [];
    let written: KubeObject | undefined;
    const client = {
      // 192.168.2.0/26 was claimed again by its node meanwhile: it exists.
      create: async (_t: ResourceType, o: KubeObject) => {
        if (o.metadata.name === '192-168-2-0-26') throw new KubeApiError(409, 'AlreadyExists', 'exists', 'POST', '/x');
        if (o.kind === 'IPAMBlock') written = o;
        creates.push(`${o.kind} ${o.metadata.name}`);
        return o;
      },
      listAll: async (t: ResourceType) =>
        t.kind === 'Pod'
          ? [{ apiVersion: 'v1', kind: 'Pod', metadata: { namespace: 'web', name: 'a' }, status: { phase: 'Running', podIP: '192.168.1.1' } }]
          : [{ apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1', annotations: { 'projectcalico.org/IPv4VXLANTunnelAddr': '192.168.1.0' } } }],
    } as unknown as KubeClient;
    const host = new RecordingIoHost();
    await writeTeardownNeeds(client, bundle, new Set(['default-ipv4-ippool']), new Reporter(host));
    expect(creates).toEqual([
      'ClusterInformation default',
      'IPAMBlock 192-168-1-0-26',
      'IPAMHandle k8s-pod-network.a',
      'IPAMHandle vxlan-tunnel-addr-n1',
      'BlockAffinity n1-a',
      'IPPool default-ipv4-ippool',
    ]);
    // The deleted pod's allocation is not written: its address would leak.
    expect(written?.spec?.allocations).toEqual([0, 1, null]);
    expect(host.messages.filter((m) => m.code === 'CNR_RESTORE_IPAM_UNUSED').map((m) => m.data)).toEqual([{ kind: 'pod', count: 1 }]);
  });
});

describe('a Calico namespace stuck on the stale APIService v3.projectcalico.org', () => {
  const api = (reason: string, ns = 'calico-apiserver'): KubeObject => ({
    apiVersion: 'apiregistration.k8s.io/v1',
    kind: 'APIService',
    metadata: { name: 'v3.projectcalico.org' },
    spec: { service: { namespace: ns, name: 'calico-api' } },
    status: { conditions: [{ type: 'Available', status: 'False', reason }] },
  });
  const ns = (stuck: boolean): KubeObject => ({
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: 'calico-apiserver', deletionTimestamp: '2026-01-01T00:00:00Z' },
    status: {
      phase: 'Terminating',
      conditions: [
        {
          type: 'NamespaceDeletionDiscoveryFailure',
          status: stuck ? 'True' : 'False',
          message:
            'Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: projectcalico.org/v3: stale GroupVersion discovery: projectcalico.org/v3',
        },
      ],
    },
  });
  const cluster = (apiService: KubeObject, namespace: KubeObject) => {
    const deleted: string[] = [];
    const client = {
      getOrUndefined: async (t: ResourceType, _ns: string | undefined, name: string) =>
        t.plural === 'apiservices' ? apiService : t.plural === 'namespaces' && name === namespace.metadata.name ? namespace : undefined,
      delete: async (t: ResourceType, _ns: string | undefined, name: string) => void deleted.push(`${t.kind} ${name}`),
    } as unknown as KubeClient;
    return { client, deleted };
  };

  it('removes the registration whose Service is gone when the namespace cannot finish deleting, and says so', async () => {
    const { client, deleted } = cluster(api('ServiceNotFound'), ns(true));
    const host = new RecordingIoHost();
    await unregisterStaleCalicoApi(client, new Reporter(host));
    expect(deleted).toEqual(['APIService v3.projectcalico.org']);
    expect(host.messages.map((m) => m.code)).toEqual(['CNR_RESTORE_STALE_API_SERVICE']);
  });

  it('leaves it alone otherwise: the namespace deleting fine, the API service failing for another reason, or its Service elsewhere', async () => {
    for (const [a, n] of [
      [api('ServiceNotFound'), ns(false)],
      [api('MissingEndpoints'), ns(true)],
      [api('ServiceNotFound', 'kube-system'), ns(true)],
    ] as const) {
      const { client, deleted } = cluster(a, n);
      await unregisterStaleCalicoApi(client, new Reporter(new RecordingIoHost()));
      expect(deleted).toEqual([]);
    }
  });
});
