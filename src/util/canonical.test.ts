import { describe, expect, it } from 'vitest';
import { canonicalJson, sortKeys } from './canonical.js';

describe('canonicalJson', () => {
  it('gives the same text whatever the key order, at every depth', () => {
    const a = { spec: { b: 1, a: [{ y: 2, x: 1 }] }, kind: 'K' };
    const b = { kind: 'K', spec: { a: [{ x: 1, y: 2 }], b: 1 } };
    expect(canonicalJson(a)).toBe(canonicalJson(b));
    expect(canonicalJson(a)).toBe('{"kind":"K","spec":{"a":[{"x":1,"y":2}],"b":1}}');
  });

  it('sorts keys that look like numbers as text (a JS object would put them first, in numeric order)', () => {
    expect(canonicalJson({ b: 0, 10: 'x', 9: 'y' })).toBe('{"10":"x","9":"y","b":0}');
  });

  it('leaves undefined members out, writes undefined array entries as null, and dates as JSON does', () => {
    expect(canonicalJson({ a: undefined, b: null })).toBe('{"b":null}');
    expect(canonicalJson([1, undefined])).toBe('[1,null]');
    expect(canonicalJson({ at: new Date('2026-01-02T03:04:05Z') })).toBe('{"at":"2026-01-02T03:04:05.000Z"}');
    expect(canonicalJson(undefined)).toBe('null');
  });

  it('tells different content apart', () => {
    expect(canonicalJson({ a: [1, 2] })).not.toBe(canonicalJson({ a: [2, 1] }));
    expect(canonicalJson({ a: '1' })).not.toBe(canonicalJson({ a: 1 }));
  });
});

describe('sortKeys', () => {
  it('returns a deep copy with sorted keys and leaves the input alone', () => {
    const input = { z: { d: 1, c: [{ b: 1, a: 2 }] }, a: 'x' };
    const out = sortKeys(input) as any;
    expect(JSON.stringify(out)).toBe('{"a":"x","z":{"c":[{"a":2,"b":1}],"d":1}}');
    expect(Object.keys(input)).toEqual(['z', 'a']);
    expect(out.z).not.toBe(input.z);
  });

  it('keeps values that are not plain objects as they are (a date stays a date)', () => {
    const at = new Date('2026-01-02T03:04:05Z');
    expect((sortKeys({ at }) as any).at).toBe(at);
  });
});
