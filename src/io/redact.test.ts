import { describe, expect, it } from 'vitest';
import { redact, registerSecret } from './redact.js';

describe('redact', () => {
  it('masks credential shapes wherever they stand in the text', () => {
    expect(redact('x token: abcdef123')).toBe('x token: ***');
    expect(redact('Authorization: PVEAPIToken=root@pam!cli=1234-5678')).not.toContain('1234-5678');
    expect(redact('header Bearer abc.def.ghi')).toBe('header Bearer ***');
    expect(redact('-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----')).toBe('-----BEGIN PRIVATE KEY-----***-----END PRIVATE KEY-----');
  });
  it('masks key: value credentials as JSON and YAML write them, not prose naming a file called passwd', () => {
    expect(redact('cni-rewind: passwd: no such bundle (file or directory not found)')).toBe('cni-rewind: passwd: no such bundle (file or directory not found)');
    expect(redact('password: hunter2')).toBe('password: ***');
    expect(redact('  password: "two words"\n  user: x')).toBe('  password: ***\n  user: x');
    expect(redact('{ password: hunter2, user: x }')).toBe('{ password: ***, user: x }');
    expect(redact('{"password":"hunter2"}')).toBe('{"password":"***"}');
    expect(redact('PASSWORD=hunter2 and more')).toBe('PASSWORD=*** and more');
  });
  it('masks registered secret values and leaves ordinary text alone', () => {
    registerSecret('canary-value-42');
    expect(redact('the value canary-value-42 leaked')).toBe('the value *** leaked');
    expect(redact('IPPool default-ipv4-ippool restored')).toBe('IPPool default-ipv4-ippool restored');
  });
});
