import { describe, expect, it } from 'vitest';
import { depthExceeds, JsonDepthScanner } from './depth.js';

describe('nesting depth', () => {
  it('depthExceeds walks 100,000 levels without overflowing', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = { x: deep };
    expect(depthExceeds(deep, 100)).toBe(true);
    expect(depthExceeds({ a: [{ b: 1 }] }, 3)).toBe(false);
  });

  it('JsonDepthScanner counts brackets outside strings, across chunk boundaries', () => {
    const scan = (...chunks: string[]) => {
      const s = new JsonDepthScanner();
      for (const c of chunks) s.update(Buffer.from(c));
      return s.deepest;
    };
    expect(scan('{"a":[{"b":"}}}{{{[[["}]}')).toBe(3);
    expect(scan('{"a":"x\\\\', '"', ',"b":{"c":"\\"{{"}}')).toBe(2);
    expect(scan('{"ü":{"[":1}}\n{"k":2}')).toBe(2);
  });
});
