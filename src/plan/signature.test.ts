import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import yaml from 'js-yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RefusedError } from '../core/errors.js';
import { checkPlanSignature, loadPlanKey, signPlan } from './signature.js';
import type { Plan } from './types.js';

const plan = (): Plan =>
  ({
    apiVersion: 'cni-rewind.io/v1',
    kind: 'Plan',
    id: 'p1',
    createdAt: '2026-12-03T10:00:00.000Z',
    cluster: { uid: 'u', name: 'c', server: 's' },
    current: { installType: 'operator', version: 'v3.28.1' },
    target: { version: 'v3.27.4', manifests: 'shipped:3.27.4', files: { 'tigera-operator.yaml': { sha256: 'a'.repeat(64) } } },
    direction: 'downgrade',
    strategy: 'in-place',
    options: { rebootNodes: false, diskSnapshots: true, maxBackupAge: '24h', flags: [] },
    bundle: { path: '/b', id: 'b', manifestSha256: 'b'.repeat(64), createdAt: '2026-12-03T09:00:00.000Z' },
    preflight: [],
    findings: [],
    transforms: { installation: { removeFields: [], trimPoolsPerFamily: false } },
    steps: [{ id: 'preflight', title: 't', description: 'd' }],
  }) as Plan;

describe('plan signatures', () => {
  let dir: string;
  const saved = { ...process.env };
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cnr-sig-'));
    process.env.XDG_CONFIG_HOME = dir;
    delete process.env.CNI_REWIND_PLAN_KEY_FILE;
  });
  afterEach(() => {
    process.env = { ...saved };
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('plan creates the default key once (0600); apply only reads it', () => {
    expect(loadPlanKey()).toBeUndefined();
    const k = loadPlanKey({ create: true })!;
    expect(k.file).toBe(path.join(dir, 'cni-rewind', 'plan-signing.key'));
    expect(fs.statSync(k.file).mode & 0o777).toBe(0o600);
    expect(loadPlanKey()!.key.equals(k.key)).toBe(true);
    expect(loadPlanKey({ create: true })!.key.equals(k.key)).toBe(true);
  });

  it('a signed plan passes, also after a YAML or JSON round trip with its keys in another order', () => {
    const k = loadPlanKey({ create: true })!;
    const signed = signPlan(plan(), k);
    checkPlanSignature(signed, 'p.yaml', k);
    checkPlanSignature(yaml.load(yaml.dump(signed, { noRefs: true, lineWidth: 140 })) as Plan, 'p.yaml', k);
    const reordered = JSON.parse(JSON.stringify(Object.fromEntries(Object.entries(signed).reverse())));
    checkPlanSignature(reordered, 'p.json', k);
  });

  it('refuses an edited policy value, an unsigned plan, another key, and no key at all', () => {
    const k = loadPlanKey({ create: true })!;
    const signed = signPlan(plan(), k);
    const edits: ((p: any) => void)[] = [
      (p) => (p.options.maxBackupAge = '1000d'),
      (p) => (p.options.diskSnapshots = false),
      (p) => p.options.flags.push('allow-field-loss'),
      (p) => p.transforms.installation.removeFields.push('spec.calicoNetwork.bgp'),
      (p) => (p.bundle.path = '/other'),
      (p) => (p.extra = 1),
    ];
    for (const edit of edits) {
      const p = structuredClone(signed);
      edit(p);
      expect(() => checkPlanSignature(p, 'p', k)).toThrow(/was changed after it was signed/);
    }
    const { signature: _s, ...unsigned } = signed;
    expect(() => checkPlanSignature(unsigned as Plan, 'p', k)).toThrow(RefusedError);
    expect(() => checkPlanSignature(unsigned as Plan, 'p', k)).toThrow(/is not signed/);
    const other = path.join(dir, 'other.key');
    fs.writeFileSync(other, 'ab'.repeat(32), { mode: 0o600 });
    expect(() => checkPlanSignature(signed, 'p', loadPlanKey({ file: other }))).toThrow(/was signed with another key/);
    expect(() => checkPlanSignature(signed, 'p', undefined)).toThrow(/no plan signing key/);
  });

  it('a named key file must exist and hold a key; one others can read gets a warning', () => {
    expect(() => loadPlanKey({ file: path.join(dir, 'missing'), create: true })).toThrow(/does not exist/);
    const bad = path.join(dir, 'bad.key');
    fs.writeFileSync(bad, 'not a key', { mode: 0o600 });
    expect(() => loadPlanKey({ file: bad })).toThrow(/does not hold a key/);
    const open = path.join(dir, 'open.key');
    fs.writeFileSync(open, 'cd'.repeat(32));
    fs.chmodSync(open, 0o644);
    const warnings: string[] = [];
    loadPlanKey({ file: open, warn: (m) => warnings.push(m) });
    expect(warnings.join('\n')).toMatch(/can be read by other users \(mode 644\)/);
  });
});
