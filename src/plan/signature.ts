/**
 * Plan signing. A plan file records policy that `apply` honours (maxBackupAge, diskSnapshots, the consent flags,
 * the transforms and findings the user reviewed). Anyone who can write the file could loosen that policy, and
 * apply cannot recompute a choice the user made. So `plan` signs the plan with an HMAC-SHA256 key the user holds
 * (a key file, by default created once in the user's config folder, mode 0600) and `apply` refuses a plan whose
 * signature is missing or does not match.
 *
 * What it protects against: a plan edited or swapped by anyone who can write the plan file (a shared folder, a CI
 * artifact, a repository) but cannot read the key. It does not protect against someone who can read the key
 * (the user's own account), and it does not replace the checks apply recomputes anyway (cluster identity,
 * bundle checksums and age, release checksums, preflight): those hold for signed plans too.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BadInputError, RefusedError } from '../core/errors.js';
import { registerSecret } from '../io/redact.js';
import { readInputFile } from '../io/safe-file.js';
import { canonicalJson } from '../util/canonical.js';
import { PLAN_SIGNATURE_ALGORITHM, type Plan } from './types.js';

export const PLAN_KEY_ENV = 'CNI_REWIND_PLAN_KEY_FILE';
const MAX_KEY_FILE_BYTES = 4096;

export interface PlanKey {
  key: Buffer;
  file: string;
  keyId: string;
}

/** `$XDG_CONFIG_HOME/cni-rewind/plan-signing.key` (default `~/.config/...`). */
export function defaultPlanKeyFile(): string {
  return path.join(process.env.XDG_CONFIG_HOME || path.join(os.homedir(), '.config'), 'cni-rewind', 'plan-signing.key');
}

const keyIdOf = (key: Buffer) => createHash('sha256').update('cni-rewind plan signing key id\n').update(key).digest('hex').slice(0, 16);

export interface PlanKeyOptions {
  /** `--plan-key-file`; else $CNI_REWIND_PLAN_KEY_FILE; else the default file. */
  file?: string;
  /** `plan`: create the default key file when it does not exist yet (a named file must exist). */
  create?: boolean;
  warn?: (message: string) => void;
}

/** The signing key, or undefined when no file is named and the default one does not exist (and `create` is off). */
export function loadPlanKey(opts: PlanKeyOptions = {}): PlanKey | undefined {
  const named = opts.file || process.env[PLAN_KEY_ENV];
  const file = named || defaultPlanKeyFile();
  if (!named && !fs.existsSync(file)) {
    if (!opts.create) return undefined;
    createKeyFile(file);
  }
  const f = readInputFile(file, 'plan signing key file', MAX_KEY_FILE_BYTES);
  if (f.mode & 0o077)
    opts.warn?.(`plan signing key file ${file} can be read by other users (mode ${(f.mode & 0o777).toString(8).padStart(3, '0')}); chmod 600 it`);
  const text = f.data.toString('utf8').trim();
  if (!/^[0-9a-fA-F]{64}$/.test(text))
    throw new BadInputError(`plan signing key file ${file} does not hold a key (64 hex characters)`, { hint: 'make one with: openssl rand -hex 32' });
  registerSecret(text);
  const key = Buffer.from(text, 'hex');
  return { key, file, keyId: keyIdOf(key) };
}

/** A new random key, 0600 in a 0700 folder; 'wx' so two concurrent `plan` runs end up with the same key. */
function createKeyFile(file: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  try {
    fs.writeFileSync(file, randomBytes(32).toString('hex') + '\n', { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
}

function mac(plan: Plan, key: Buffer): string {
  const { signature: _ignored, ...rest } = plan;
  return createHmac('sha256', key).update('cni-rewind plan v1\n').update(canonicalJson(rest)).digest('hex');
}

export function signPlan(plan: Plan, k: PlanKey): Plan {
  const { signature: _old, ...rest } = plan;
  return { ...rest, signature: { algorithm: PLAN_SIGNATURE_ALGORITHM, keyId: k.keyId, value: mac(rest as Plan, k.key) } };
}

/** Refuse (exit 5) a plan that is unsigned, signed with another key, or changed since it was signed. */
export function checkPlanSignature(plan: Plan, file: string, k: PlanKey | undefined): void {
  const hint = 'make the plan again with `cni-rewind plan`, or give the key it was signed with (--plan-key-file)';
  const s = plan.signature;
  if (!s || typeof s !== 'object' || typeof s.value !== 'string')
    throw new RefusedError(`the plan ${file} is not signed; apply runs only plans signed by \`cni-rewind plan\``, { hint });
  if (!k)
    throw new RefusedError(`cannot check the signature of plan ${file}: no plan signing key (${defaultPlanKeyFile()} does not exist)`, {
      hint: 'give the key it was signed with: --plan-key-file FILE or $' + PLAN_KEY_ENV,
    });
  if (s.algorithm !== PLAN_SIGNATURE_ALGORITHM)
    throw new RefusedError(`the plan ${file} is signed with ${JSON.stringify(s.algorithm)}, not ${PLAN_SIGNATURE_ALGORITHM}`, { hint });
  if (s.keyId !== k.keyId)
    throw new RefusedError(`the plan ${file} was signed with another key (key id ${String(s.keyId)}, this key ${k.keyId} from ${k.file})`, { hint });
  const want = Buffer.from(mac(plan, k.key), 'hex');
  const have = Buffer.from(/^[0-9a-f]{64}$/.test(s.value) ? s.value : '', 'hex');
  if (have.length !== want.length || !timingSafeEqual(have, want)) {
    throw new RefusedError(`the plan ${file} was changed after it was signed (its signature does not match)`, {
      hint: 'make a new plan with `cni-rewind plan`; apply does not run an edited plan',
    });
  }
}
