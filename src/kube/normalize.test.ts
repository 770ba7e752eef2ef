import { describe, expect, it } from 'vitest';
import { stripServerFields } from './normalize.js';

describe('stripServerFields', () => {
  const live = {
    apiVersion: 'crd.projectcalico.org/v1',
    kind: 'IPPool',
    metadata: {
      name: 'p',
      uid: 'u1',
      resourceVersion: '42',
      generation: 3,
      creationTimestamp: '2026-01-01T00:00:00Z',
      managedFields: [{ manager: 'x' }],
      labels: { a: 'b' },
      annotations: {},
      ownerReferences: [{ apiVersion: 'v1', kind: 'X', name: 'o', uid: 'ou' }],
    },
    spec: { cidr: '10.0.0.0/16', disabled: true },
    status: { observed: 1 },
  };

  it('removes server-owned fields and status, keeps what users set, and leaves the input alone', () => {
    const s = stripServerFields(live as any);
    expect(s).toEqual({
      apiVersion: 'crd.projectcalico.org/v1',
      kind: 'IPPool',
      metadata: { name: 'p', labels: { a: 'b' }, ownerReferences: [{ apiVersion: 'v1', kind: 'X', name: 'o', uid: 'ou' }] },
      spec: { cidr: '10.0.0.0/16', disabled: true },
    });
    expect(live.metadata.uid).toBe('u1');
    expect(live.status).toEqual({ observed: 1 });
  });

  it('drops owner uids on request and keeps status on request', () => {
    const s = stripServerFields(live as any, { ownerUids: true, keepStatus: true });
    expect(s.metadata.ownerReferences).toEqual([{ apiVersion: 'v1', kind: 'X', name: 'o' }]);
    expect(s.status).toEqual({ observed: 1 });
  });

  it("drops the server fields inside Calico's v3 metadata annotation when comparing, and only then", () => {
    // As Calico 3.27.4's kube-controllers writes it: the object's own uid in the annotation.
    const meta = { uid: 'u-v1', generation: 1, creationTimestamp: '2026-12-07T07:18:02Z', name: 'default', labels: { a: 'b' } };
    const kcc = {
      apiVersion: 'crd.projectcalico.org/v1',
      kind: 'KubeControllersConfiguration',
      metadata: { name: 'default', annotations: { 'projectcalico.org/metadata': JSON.stringify(meta) } },
    };
    const compared = stripServerFields(kcc as any, { v3MetadataServerFields: true });
    expect(JSON.parse(compared.metadata.annotations!['projectcalico.org/metadata']!)).toEqual({ name: 'default', labels: { a: 'b' } });
    expect(JSON.parse(stripServerFields(kcc as any).metadata.annotations!['projectcalico.org/metadata']!)).toEqual(meta);
    const unreadable = { ...kcc, metadata: { name: 'default', annotations: { 'projectcalico.org/metadata': '{not json' } } };
    expect(stripServerFields(unreadable as any, { v3MetadataServerFields: true }).metadata.annotations!['projectcalico.org/metadata']).toBe('{not json');
  });
});
