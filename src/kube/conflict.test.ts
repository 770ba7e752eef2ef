import { describe, expect, it } from 'vitest';
import { KubeApiError } from './client.js';
import { retryOnConflict } from './conflict.js';

const conflict = () => new KubeApiError(409, 'Conflict', 'the object has been modified', 'PUT', '/x');

describe('retryOnConflict', () => {
  it('reads and writes again after a conflict, and gives up after its tries', async () => {
    let calls = 0;
    expect(await retryOnConflict(async () => (++calls < 3 ? Promise.reject(conflict()) : 'written'))).toBe('written');
    expect(calls).toBe(3);
    calls = 0;
    await expect(retryOnConflict(async () => (calls++, Promise.reject(conflict())), 4)).rejects.toThrow('modified');
    expect(calls).toBe(4);
  });

  it('does not retry any other error', async () => {
    let calls = 0;
    const denied = new KubeApiError(403, 'Forbidden', 'forbidden', 'PUT', '/x');
    await expect(retryOnConflict(async () => (calls++, Promise.reject(denied)))).rejects.toBe(denied);
    expect(calls).toBe(1);
  });
});
