import { describe, expect, it } from 'vitest';
import { redact } from '../../src/io/redact.js';
import { ProxmoxApi, parseUpid } from './api.js';

describe('Proxmox API helpers', () => {
  it('parses UPIDs (pve-common UPID.pm format) and rejects other text', () => {
    expect(parseUpid('UPID:pve1:00001A2B:0012D687:6566F0A1:qmsnapshot:101:root@pam!ci:')).toEqual({
      node: 'pve1',
      type: 'qmsnapshot',
      id: '101',
      user: 'root@pam!ci',
    });
    expect(parseUpid('not a upid')).toBeUndefined();
  });

  it('refuses a malformed token without echoing it, and registers a good one as a secret', () => {
    expect(() => new ProxmoxApi({ url: new URL('https://127.0.0.1:8006'), token: 'secret-only-value', tls: {} })).toThrow(
      /not of the form USER@REALM!TOKENID=SECRET$/,
    );
    const token = 'ops@pve!backup=11111111-2222-3333-4444-555555555555';
    new ProxmoxApi({ url: new URL('https://127.0.0.1:8006'), token, tls: {} }).close();
    expect(redact(`sending ${token}`)).not.toContain('11111111-2222-3333-4444-555555555555');
  });
});
