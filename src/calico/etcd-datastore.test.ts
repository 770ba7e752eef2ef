import { describe, expect, it } from 'vitest';
import { etcdKindOf, hasUnsafeInteger, ipamRecord, ipamRecordType, parseResourceKey, resourceKeyOf, roleOf } from './etcd-datastore.js';
import { calicoEtcdConnection, splitEndpoints } from './etcd-connection.js';
import { prefixEnd } from '../etcd/gateway.js';
import { isErrorKind } from '../core/errors.js';
import type { KubeClient } from '../kube/client.js';
import type { ResourceType } from '../kube/types.js';

// Keys as libcalico-go v3.28.1 writes them (lib/backend/model/resource.go, block.go, block_affinity.go, ipam_handle.go).
describe("Calico's etcd key layout", () => {
  it('parses resource keys of cluster-scoped and namespaced kinds, and refuses malformed ones', () => {
    const pool = parseResourceKey('/calico/resources/v3/projectcalico.org/ippools/default-ipv4-ippool');
    expect(pool).toMatchObject({ kind: { kind: 'IPPool' }, name: 'default-ipv4-ippool' });
    const wep = parseResourceKey('/calico/resources/v3/projectcalico.org/workloadendpoints/default/node1-k8s-pod-eth0');
    expect(wep).toMatchObject({ kind: { kind: 'WorkloadEndpoint' }, namespace: 'default', name: 'node1-k8s-pod-eth0' });
    expect(parseResourceKey('/calico/resources/v3/projectcalico.org/networkpolicies/only-a-name')).toBeUndefined();
    expect(parseResourceKey('/calico/resources/v3/projectcalico.org/ippools/ns/extra')).toBeUndefined();
    expect(parseResourceKey('/calico/resources/v3/projectcalico.org/widgets/w1')).toEqual({ unknownPlural: 'widgets' });
    expect(parseResourceKey('/registry/pods/default/p')).toBeUndefined();
  });

  it('builds keys only from its own table, never for a name or namespace that would leave its folder', () => {
    const policy = { apiVersion: 'projectcalico.org/v3', kind: 'NetworkPolicy', metadata: { name: 'allow', namespace: 'prod' } };
    expect(resourceKeyOf(policy)?.key).toBe('/calico/resources/v3/projectcalico.org/networkpolicies/prod/allow');
    expect(resourceKeyOf({ ...policy, metadata: { name: '../../ipam/v2/handle/x', namespace: 'prod' } })).toBeUndefined();
    expect(resourceKeyOf({ ...policy, metadata: { name: 'allow' } })).toBeUndefined(); // namespaced kind without a namespace
    expect(resourceKeyOf({ ...policy, kind: 'IPPool' })).toBeUndefined(); // cluster-scoped kind with one
    expect(resourceKeyOf({ ...policy, kind: 'Secret' })).toBeUndefined();
  });

  it('names IPAM records and nothing else under /calico/ipam/v2/', () => {
    expect(ipamRecordType('/calico/ipam/v2/assignment/ipv4/block/192.168.0.0-26')).toBe('block');
    expect(ipamRecordType('/calico/ipam/v2/assignment/ipv6/block/fd00::-122')).toBe('block');
    expect(ipamRecordType('/calico/ipam/v2/handle/k8s-pod-network.abc')).toBe('handle');
    expect(ipamRecordType('/calico/ipam/v2/host/node-1/ipv4/block/192.168.0.0-26')).toBe('affinity');
    expect(ipamRecordType('/calico/ipam/v2/config')).toBe('config');
    expect(ipamRecordType('/calico/ipam/v2/handle/a/b')).toBeUndefined();
    expect(ipamRecordType('/calico/ipam/v2/../resources/v3/projectcalico.org/ippools/p')).toBeUndefined();
    expect(ipamRecordType('/calico/resources/v3/projectcalico.org/ippools/p')).toBeUndefined();
  });

  it("treats what Calico's programs write as state, and kube-controllers' knp. policies too", () => {
    expect(roleOf(etcdKindOf('NetworkPolicy')!, 'knp.default.allow-dns')).toBe('state');
    expect(roleOf(etcdKindOf('NetworkPolicy')!, 'allow-dns')).toBe('config');
    expect(etcdKindOf('WorkloadEndpoint')!.role).toBe('state');
    expect(etcdKindOf('IPPool')!.role).toBe('config');
  });

  it('prefixEnd is the first key after every key of the prefix', () => {
    expect(prefixEnd('/calico/a/').toString()).toBe('/calico/a0');
    expect(splitEndpoints(' https://a:2379, ,https://b:2379')).toEqual(['https://a:2379', 'https://b:2379']);
  });
});

function client(objects: Record<string, unknown>): KubeClient {
  return {
    async getOrUndefined(r: ResourceType, ns: string | undefined, name: string) {
      return objects[`${r.kind}/${ns}/${name}`];
    },
  } as unknown as KubeClient;
}

describe("finding Calico's etcd as calico-node does", () => {
  const config = {
    data: {
      etcd_endpoints: 'https://127.0.0.1:2379',
      etcd_ca: '/calico-secrets/etcd-ca',
      etcd_cert: '/calico-secrets/etcd-cert',
      etcd_key: '/calico-secrets/etcd-key',
    },
  };
  it('reads the TLS files from calico-etcd-secrets under the names calico-config gives', async () => {
    const secret = {
      data: {
        'etcd-ca': Buffer.from('CA').toString('base64'),
        'etcd-cert': Buffer.from('CERT').toString('base64'),
        'etcd-key': Buffer.from('KEY').toString('base64'),
      },
    };
    const conn = await calicoEtcdConnection(client({ 'ConfigMap/kube-system/calico-config': config, 'Secret/kube-system/calico-etcd-secrets': secret }));
    expect(conn.endpoints).toEqual(['https://127.0.0.1:2379']);
    expect([conn.tls.ca?.toString(), conn.tls.cert?.toString(), conn.tls.key?.toString()]).toEqual(['CA', 'CERT', 'KEY']);
  });

  it('refuses by name when the files are mounted from elsewhere, naming the flag, and never shows key material', async () => {
    const err = (await calicoEtcdConnection(client({ 'ConfigMap/kube-system/calico-config': config })).catch((e: unknown) => e)) as Error;
    expect(isErrorKind(err, 'refused')).toBe(true);
    expect(err.message).toContain('Secret kube-system/calico-etcd-secrets has no etcd-ca');
    expect((err as { hint?: string }).hint).toContain('--etcd-ca');
  });

  it('refuses an endpoint that is not a URL', async () => {
    const err = await calicoEtcdConnection(client({}), { etcdEndpoints: 'not a url' }).catch((e: unknown) => e as Error);
    expect(isErrorKind(err, 'refused')).toBe(true);
  });
});

describe('IPAM records keep the exact text etcd held', () => {
  it('a 64-bit sequenceNumber travels as text, and an unsafe integer is found outside strings only', () => {
    const raw = '{"cidr":"192.168.137.0/26","sequenceNumber":1796638193357450117}';
    expect(JSON.stringify(JSON.parse(raw))).not.toBe(raw); // what parsing would have done to it
    expect((ipamRecord('/calico/ipam/v2/assignment/ipv4/block/192.168.137.0-26', raw) as unknown as { raw: string }).raw).toBe(raw);
    expect(hasUnsafeInteger(raw)).toBe(true);
    expect(hasUnsafeInteger('{"asNumber":64512,"id":"1796638193357450117"}')).toBe(false);
  });
});
