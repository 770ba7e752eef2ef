/**
 * The import rules of docs/ARCHITECTURE.md, checked on source text: a module may import its own layer or lower
 * ones, never a higher one; no import cycle between files or between folders; a provider imports only its SDK,
 * Node built-ins, its own folder and the provider kit; shipped code never imports tests, benchmarks or examples.
 * Pure functions over a map of files, so the checker itself is unit-tested on trees made up for the purpose.
 */
import ts from 'typescript';
import path from 'node:path/posix';

/** One row of the layer table: a folder (or file) of the tree and its layer, 0 the lowest. */
export interface LayerEntry {
  layer: number;
  folder: string;
}

export interface Violation {
  rule: 'layer' | 'cycle' | 'folder-cycle' | 'provider' | 'unowned' | 'test-code';
  message: string;
}

/** The place every built-in provider and every third-party one may import from `src/`. */
export const PROVIDER_KIT = 'src/provider-kit';

/** Every module specifier a file imports or re-exports, static or dynamic, type-only included. */
export function importsOf(text: string): string[] {
  return ts.preProcessFile(text, true, true).importedFiles.map((f) => f.fileName);
}

/** The repository path a relative specifier of `from` names (`./x.js` is the source `./x.ts`). */
export function resolveSpecifier(from: string, spec: string): string | undefined {
  if (!spec.startsWith('.')) return undefined;
  const joined = path.normalize(path.join(path.dirname(from), spec));
  return joined.replace(/\.js$/, '.ts');
}

/** The table entry a file belongs to: the longest folder (or the file itself) that contains it. */
export function ownerOf(file: string, table: LayerEntry[]): LayerEntry | undefined {
  let best: LayerEntry | undefined;
  for (const e of table) {
    if (file === e.folder || file.startsWith(`${e.folder}/`)) if (!best || e.folder.length > best.folder.length) best = e;
  }
  return best;
}

const SHIPPED = /^(src|providers)\//;
const NOT_SHIPPED = /^(test|bench|examples)\//;

/** Check a tree (repository path -> source text of each non-test module) against the layer table. */
export function checkImports(files: Map<string, string>, table: LayerEntry[]): Violation[] {
  const out: Violation[] = [];
  const fileEdges = new Map<string, Set<string>>();
  const folderEdges = new Map<string, Set<string>>();
  for (const [file, text] of files) {
    const providerFolder = /^providers\/[^/]+/.exec(file)?.[0];
    const owner = providerFolder ? undefined : ownerOf(file, table);
    if (!providerFolder && file.startsWith('src/') && !owner) out.push({ rule: 'unowned', message: `${file} is in no folder of the layer table` });
    for (const spec of importsOf(text)) {
      if (providerFolder && /^cni-rewind(\/|$)/.test(spec) && spec !== 'cni-rewind/provider') {
        out.push({ rule: 'provider', message: `${file} imports ${spec}: a provider imports only cni-rewind/provider from cni-rewind` });
      }
      const target = resolveSpecifier(file, spec);
      if (!target) continue;
      if (SHIPPED.test(file) && NOT_SHIPPED.test(target))
        out.push({ rule: 'test-code', message: `${file} imports ${target}: shipped code never imports tests, benchmarks or examples` });
      if (files.has(target)) addEdge(fileEdges, file, target);
      if (providerFolder) {
        if (!target.startsWith(`${providerFolder}/`) && !target.startsWith(`${PROVIDER_KIT}/`)) {
          out.push({ rule: 'provider', message: `${file} imports ${target}: a provider imports only its SDK, its own folder and ${PROVIDER_KIT}` });
        }
        continue;
      }
      const to = ownerOf(target, table);
      if (!owner || !to || to.folder === owner.folder) continue;
      addEdge(folderEdges, owner.folder, to.folder);
      if (to.layer > owner.layer) {
        out.push({
          rule: 'layer',
          message: `${file} (layer ${owner.layer}, ${owner.folder}) imports ${target} (layer ${to.layer}, ${to.folder}): a lower layer never imports a higher one`,
        });
      }
    }
  }
  for (const c of cycles(fileEdges)) out.push({ rule: 'cycle', message: `files in an import cycle: ${c.join(', ')}` });
  for (const c of cycles(folderEdges)) out.push({ rule: 'folder-cycle', message: `folders in an import cycle: ${c.join(', ')}` });
  return out;
}

function addEdge(edges: Map<string, Set<string>>, from: string, to: string): void {
  let s = edges.get(from);
  if (!s) edges.set(from, (s = new Set()));
  s.add(to);
}

/** The strongly connected components of more than one node (Tarjan), each as one cycle's members, sorted. */
export function cycles(edges: Map<string, Set<string>>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const members: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      members.push(w);
    } while (w !== v);
    if (members.length > 1) found.push(members.sort());
  };
  for (const v of [...edges.keys()].sort()) if (!index.has(v)) visit(v);
  return found;
}

/**
 * The layer table of docs/ARCHITECTURE.md: the rows of its table whose first cell is a layer number and whose
 * second names a folder or file in backquotes, e.g. `| 2 | \`src/bundle\` | ... |`.
 */
export function parseLayerTable(markdown: string): LayerEntry[] {
  const rows: LayerEntry[] = [];
  for (const line of markdown.split('\n')) {
    const m = /^\|\s*(\d+)\s*\|\s*`([^`]+)`/.exec(line);
    if (m) rows.push({ layer: Number(m[1]), folder: m[2].replace(/\/$/, '') });
  }
  return rows;
}
