import { describe, expect, it } from 'vitest';
import { azureName, describeAzureError, deviceOf, lunOf, parseArmId, sameId } from './arm.js';

describe('azure resource ids, names and errors', () => {
  it('reads a disk or snapshot resource id, and refuses anything else', () => {
    expect(parseArmId('/subscriptions/s-1/resourceGroups/MC_rg/providers/Microsoft.Compute/snapshots/cnr-a-os-1a2b3c')).toEqual({
      subscription: 's-1',
      resourceGroup: 'MC_rg',
      name: 'cnr-a-os-1a2b3c',
    });
    expect(() => parseArmId('vol-0abc')).toThrow(/not an Azure resource id/);
    expect(sameId('/subscriptions/S/resourceGroups/RG/x', '/subscriptions/s/resourcegroups/rg/X')).toBe(true);
    expect(sameId(undefined, 'x')).toBe(false);
  });
  it('makes names Azure accepts: 1-80 of [A-Za-z0-9_.-], alphanumeric first, no trailing dot or dash', () => {
    const n = azureName('cnr', `node.with/odd chars-${'x'.repeat(120)}`, 'lun-0');
    expect(n.length).toBeLessThanOrEqual(80);
    expect(n).toMatch(/^[A-Za-z0-9][A-Za-z0-9_.-]*[A-Za-z0-9_]$/);
    expect(azureName('..', '-')).toMatch(/^cnr-[0-9a-f]{6}$/);
  });
  it('maps devices and luns both ways', () => {
    expect([deviceOf(undefined), deviceOf(3)]).toEqual(['os', 'lun-3']);
    expect([lunOf('os'), lunOf('lun-12')]).toEqual([undefined, 12]);
  });
  it('turns SDK errors into one environment line with a hint', () => {
    expect(describeAzureError('get VM', Object.assign(new Error('denied'), { statusCode: 403, code: 'AuthorizationFailed' }))).toMatchObject({
      name: 'EnvironmentError',
      message: 'Azure get VM: permission denied (AuthorizationFailed): denied',
      hint: expect.stringContaining('examples/azure-role.json'),
    });
    const noCred = Object.assign(new Error('ChainedTokenCredential authentication failed.'), { name: 'AggregateAuthenticationError' });
    expect(describeAzureError('list snapshots', noCred)).toMatchObject({
      name: 'EnvironmentError',
      message: expect.stringContaining('no usable Azure credentials'),
    });
  });
});
