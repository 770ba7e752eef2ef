import { describe, expect, it } from 'vitest';
import { normalizedYaml } from './diff.js';

describe('normalizedYaml', () => {
  it('is equal for the same object whatever the key order and server fields', () => {
    const a = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', uid: '1', resourceVersion: '5' }, data: { b: '2', a: '1' } };
    const b = { kind: 'ConfigMap', data: { a: '1', b: '2' }, metadata: { resourceVersion: '9', name: 'x', uid: '2' }, apiVersion: 'v1' };
    expect(normalizedYaml(a as any)).toBe(normalizedYaml(b as any));
    expect(normalizedYaml(a as any)).not.toMatch(/uid|resourceVersion/);
  });
  it('differs when a user-set value differs', () => {
    const a = { apiVersion: 'v1', kind: 'X', metadata: { name: 'x' }, spec: { disabled: true } };
    const b = { ...a, spec: { disabled: false } };
    expect(normalizedYaml(a as any)).not.toBe(normalizedYaml(b as any));
  });
});
