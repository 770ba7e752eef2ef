import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/core/package-root.js';
import { checkImports, importsOf, parseLayerTable, type LayerEntry } from './import-rules.js';

const TABLE: LayerEntry[] = [
  { layer: 0, folder: 'src/core' },
  { layer: 1, folder: 'src/kube' },
  { layer: 1, folder: 'src/provider-kit' },
  { layer: 2, folder: 'src/plan' },
  { layer: 2, folder: 'src/drain' },
  { layer: 3, folder: 'src/cli' },
];

const tree = (files: Record<string, string>) => new Map(Object.entries(files));
const rules = (files: Record<string, string>) => checkImports(tree(files), TABLE).map((v) => v.rule);

describe('the import-rule checker', () => {
  it('finds static, re-exported, type-only and dynamic imports', () => {
    const text = "import a from './a.js';\nimport type { B } from '../b.js';\nexport * from './c.js';\nconst d = await import('./d.js');\nimport 'node:fs';";
    expect(importsOf(text)).toEqual(['./a.js', '../b.js', './c.js', './d.js', 'node:fs']);
  });

  it('accepts a tree that follows the rules', () => {
    expect(
      checkImports(
        tree({
          'src/core/errors.ts': "import { x } from 'node:fs';",
          'src/kube/client.ts': "import { E } from '../core/errors.js';",
          'src/plan/plan.ts': "import { c } from '../kube/client.js';\nimport { d } from '../drain/drain.js';",
          'src/drain/drain.ts': "import { c } from '../kube/client.js';",
          'src/provider-kit/index.ts': "export * from '../core/errors.js';",
          'providers/aws/index.ts':
            "import { EC2Client } from '@aws-sdk/client-ec2';\nimport { E } from '../../src/provider-kit/index.js';\nimport { r } from './retry.js';",
          'providers/aws/retry.ts': "import type { Kit } from 'cni-rewind/provider';",
        }),
        TABLE,
      ),
    ).toEqual([]);
  });

  it('fails on a lower layer importing a higher one, naming both', () => {
    const v = checkImports(tree({ 'src/kube/client.ts': "import type { Plan } from '../plan/plan.js';", 'src/plan/plan.ts': '' }), TABLE);
    expect(v).toHaveLength(1);
    expect(v[0].message).toMatch(/src\/kube\/client.ts \(layer 1, src\/kube\) imports src\/plan\/plan.ts \(layer 2, src\/plan\)/);
  });

  it('fails on a file cycle, type-only imports included, and on a folder cycle within one layer', () => {
    expect(rules({ 'src/plan/a.ts': "import type { B } from './b.js';", 'src/plan/b.ts': "import type { A } from './a.js';" })).toEqual(['cycle']);
    const v = checkImports(
      tree({ 'src/plan/a.ts': "import { d } from '../drain/d.js';", 'src/drain/d.ts': "import { p } from '../plan/b.js';", 'src/plan/b.ts': '' }),
      TABLE,
    );
    expect(v.map((x) => x.message)).toEqual(['folders in an import cycle: src/drain, src/plan']);
  });

  it('fails on a provider importing anything but its SDK, its folder and the kit', () => {
    expect(rules({ 'providers/aws/index.ts': "import { E } from '../../src/core/errors.js';", 'src/core/errors.ts': '' })).toEqual(['provider']);
    expect(rules({ 'providers/vsphere/soap.ts': "import { h } from '../proxmox/https.js';", 'providers/proxmox/https.ts': '' })).toEqual(['provider']);
    expect(rules({ 'providers/gcp/index.ts': "import { x } from 'cni-rewind/dist/src/core/errors.js';" })).toEqual(['provider']);
  });

  it('fails on shipped code importing test support, and on a src/ folder missing from the table', () => {
    expect(rules({ 'src/plan/a.ts': "import { t } from '../../test/support/x.js';" })).toEqual(['test-code']);
    expect(rules({ 'src/elsewhere/x.ts': '' })).toEqual(['unowned']);
  });

  it('reads the layer table from markdown rows that start with a layer number and a folder in backquotes', () => {
    const md = '| layer | folder | holds |\n|---|---|---|\n| 0 | `src/core/` | errors |\n| 3 | `src/cli` | commands |\n\nNot a row: | x | `src/y` |';
    expect(parseLayerTable(md)).toEqual([
      { layer: 0, folder: 'src/core' },
      { layer: 3, folder: 'src/cli' },
    ]);
  });
});

/** Every non-test TypeScript module under src/ and providers/, by repository path. */
function shippedModules(root: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (rel: string) => {
    for (const name of readdirSync(path.join(root, rel))) {
      const child = `${rel}/${name}`;
      if (statSync(path.join(root, child)).isDirectory()) walk(child);
      else if (name.endsWith('.ts') && !name.endsWith('.test.ts') && !name.endsWith('.d.ts')) out.set(child, readFileSync(path.join(root, child), 'utf8'));
    }
  };
  walk('src');
  walk('providers');
  return out;
}

describe('this repository', () => {
  const root = packageRoot();
  const layerTable = () => parseLayerTable(readFileSync(path.join(root, 'docs', 'ARCHITECTURE.md'), 'utf8'));

  it('follows the import rules of docs/ARCHITECTURE.md', () => {
    const table = layerTable();
    expect(table.length).toBeGreaterThan(5);
    const violations = checkImports(shippedModules(root), table);
    expect(violations.map((v) => v.message)).toEqual([]);
  });

  it('has docs/ARCHITECTURE.md name every src/ folder, and every folder it names exists', () => {
    const named = new Set(layerTable().map((e) => e.folder));
    for (const f of named) expect(statSync(path.join(root, f), { throwIfNoEntry: false }), `${f} is in the table but not in the tree`).toBeDefined();
    const folders = readdirSync(path.join(root, 'src')).filter((n) => statSync(path.join(root, 'src', n)).isDirectory());
    const unnamed = folders.filter((n) => ![...named].some((f) => f === `src/${n}` || f.startsWith(`src/${n}/`)));
    expect(unnamed, 'src/ folders missing from the table of docs/ARCHITECTURE.md').toEqual([]);
    const looseFiles = readdirSync(path.join(root, 'src')).filter((n) => n.endsWith('.ts'));
    expect(looseFiles, 'modules directly in src/ (each module belongs to a folder of the table)').toEqual([]);
  });
});
