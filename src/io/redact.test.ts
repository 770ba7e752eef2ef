import { describe, expect, it } from 'vitest';
import { redact, registerSecret } from './redact.js';

describe('redact', () => {
  it('masks credential shapes wherever they stand in the text', () => {
    expect(redact('x token: abcdef123')).toBe('x token: ***');
    expect(redact('Authorization: PVEAPIToken=root@pam!cli=1234-5678')).not.toContain('1234-5678');
    expect(redact('header Bearer abc.def.ghi')).toBe('header Bearer ***');
    expect(redact('-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----')).toBe('-----BEGIN PRIVATE KEY-----***-----END PRIVATE KEY-----');
  });
  it('masks registered secret values and leaves ordinary text alone', () => {
    registerSecret('canary-value-42');
    expect(redact('the value canary-value-42 leaked')).toBe('the value *** leaked');
    expect(redact('IPPool default-ipv4-ippool restored')).toBe('IPPool default-ipv4-ippool restored');
  });
});
