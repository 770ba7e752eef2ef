/**
 * Azure Resource Manager helpers for the Azure provider (providers/azure/index.ts): resource ids, tag names,
 * resource naming and error mapping. No SDK import here, so this file loads without @azure/*.
 */
import { randomBytes } from 'node:crypto';
import { BadInputError, EnvironmentError, errorMessage, FLAT_TAG_KEYS, isErrorKind } from '../../src/provider-kit/index.js';

/**
 * Tag names on what cni-rewind creates. Azure tag names may not contain `/` (nor `<>%&\?`), so the shared keys
 * (`cni-rewind/bundle-id`) are written with `-`; values are kept exact (up to 256 characters).
 */
export const AZURE_TAGS = FLAT_TAG_KEYS;

/** What a resource id says: `/subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/<type>/<name>[/...]`. */
export interface ArmId {
  subscription: string;
  resourceGroup: string;
  /** The last name in the id (disk, snapshot or VM name). */
  name: string;
}

export function parseArmId(id: string): ArmId {
  const m = /^\/subscriptions\/([^/]+)\/resourceGroups\/([^/]+)\/providers\/[^/]+\/.+\/([^/]+)$/i.exec(id.trim());
  if (!m) throw new BadInputError(`not an Azure resource id: ${id}`);
  return { subscription: m[1]!, resourceGroup: m[2]!, name: m[3]! };
}

export const sameId = (a: string | undefined, b: string | undefined) => !!a && !!b && a.toLowerCase() === b.toLowerCase();

/** An Azure disk/snapshot name: 1-80 of [A-Za-z0-9_.-], starting alphanumeric, not ending with `.` or `-`; a random suffix. */
export function azureName(...parts: string[]): string {
  const suffix = randomBytes(3).toString('hex');
  const head = parts
    .join('-')
    .replace(/[^A-Za-z0-9_.-]+/g, '-')
    .replace(/-+/g, '-')
    .replace(/^[^A-Za-z0-9]+/, '')
    .slice(0, 80 - suffix.length - 1)
    .replace(/[.-]+$/, '');
  return `${head || 'cnr'}-${suffix}`;
}

/** The device name a record uses: `os` for the OS disk, `lun-N` for a data disk. */
export const deviceOf = (lun: number | undefined) => (lun === undefined ? 'os' : `lun-${lun}`);
export const lunOf = (device: string) => (/^lun-(\d+)$/.exec(device) ? Number(device.slice(4)) : undefined);

/** The SDK's errors: RestError (statusCode, code), credential errors (by name, the classes are not imported here). */
export function statusOf(err: unknown): number | undefined {
  const s = (err as { statusCode?: unknown })?.statusCode;
  return typeof s === 'number' ? s : undefined;
}

export const isNotFound = (err: unknown) => statusOf(err) === 404;

export function describeAzureError(op: string, err: unknown): Error {
  if (isErrorKind(err, 'environment') || isErrorKind(err, 'bad-input')) return err;
  const name = (err as { name?: string })?.name ?? '';
  const msg = errorMessage(err).split('\n')[0];
  if (/CredentialUnavailableError|AggregateAuthenticationError|AuthenticationError/.test(name)) {
    return new EnvironmentError(`Azure ${op}: no usable Azure credentials (${msg})`, {
      hint: 'sign in with `az login`, or set AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_CLIENT_SECRET, a workload identity or a managed identity',
      cause: err,
    });
  }
  const status = statusOf(err);
  const code = (err as { code?: string })?.code;
  if (status === 401 || status === 403)
    return new EnvironmentError(`Azure ${op}: permission denied (${code ?? status}): ${msg}`, {
      hint: 'see examples/azure-role.json for the role cni-rewind needs',
      cause: err,
    });
  if (/ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ETIMEDOUT|ECONNRESET/.test(`${code} ${msg}`))
    return new EnvironmentError(`Azure ${op}: cannot reach Azure Resource Manager (${msg})`, { cause: err });
  return new EnvironmentError(`Azure ${op} failed${status ? ` (${status}${code ? ` ${code}` : ''})` : ''}: ${msg}`, { cause: err });
}
