#!/usr/bin/env node
// Copies Calico release manifests into calico-releases/ (gzipped, byte-for-byte when unzipped) and writes the
// index the tool reads at run time. Run it when adding a release:
//   node tools/vendor-calico-releases.mjs <folder with X.Y.Z/manifests/*.yaml> [X.Y.Z ...]
// The index records each file's sha256 of the upstream bytes; the loader checks it on every read, so a damaged or
// hand-edited shipped file is caught instead of planned against.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import yaml from 'js-yaml';

// calico-etcd.yaml: the manifest install on the etcd datastore (plans of etcd installs, the local cluster's etcd mode).
const FILES = ['tigera-operator.yaml', 'operator-crds.yaml', 'custom-resources.yaml', 'calico.yaml', 'calico-etcd.yaml'];
const [src, ...only] = process.argv.slice(2);
if (!src) {
  console.error('usage: node tools/vendor-calico-releases.mjs <source folder> [X.Y.Z ...]');
  process.exit(2);
}
const out = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'calico-releases');
const indexPath = path.join(out, 'index.json');
const index = existsSync(indexPath) ? JSON.parse(readFileSync(indexPath, 'utf8')) : { releases: {} };

const versions = only.length ? only : readdirSync(src).filter((d) => /^\d+\.\d+\.\d+$/.test(d));
const docs = (text) => yaml.loadAll(text).filter((d) => d && typeof d === 'object');
const crdNames = (objs) => objs.filter((o) => o.kind === 'CustomResourceDefinition').map((o) => o.metadata.name).sort();

for (const v of versions) {
  const dir = [path.join(src, v, 'manifests'), path.join(src, v)].find((d) => existsSync(path.join(d, 'calico.yaml')) || existsSync(path.join(d, 'tigera-operator.yaml')));
  if (!dir) throw new Error(`no manifests for ${v} under ${src}`);
  mkdirSync(path.join(out, v), { recursive: true });
  const entry = { files: {}, crds: {} };
  for (const f of FILES) {
    const p = path.join(dir, f);
    if (!existsSync(p)) continue;
    const bytes = readFileSync(p);
    const gz = path.join(out, v, `${f}.gz`);
    writeFileSync(`${gz}.tmp`, gzipSync(bytes, { level: 9 }));
    renameSync(`${gz}.tmp`, gz);
    const objs = docs(bytes.toString('utf8'));
    entry.files[f] = { sha256: createHash('sha256').update(bytes).digest('hex'), bytes: bytes.length };
    entry.crds[f] = crdNames(objs).length;
    if (f === 'tigera-operator.yaml') {
      const dep = objs.find((o) => o.kind === 'Deployment' && o.metadata.name === 'tigera-operator');
      entry.operatorImage = dep.spec.template.spec.containers[0].image;
    }
  }
  entry.installTypes = [...(entry.files['tigera-operator.yaml'] ? ['operator'] : []), ...(entry.files['calico.yaml'] ? ['manifest'] : [])];
  index.releases[v] = entry;
  console.log(`${v}: ${Object.keys(entry.files).join(', ')} operator ${entry.operatorImage ?? '-'}`);
}
const sorted = Object.fromEntries(Object.entries(index.releases).sort(([a], [b]) => a.localeCompare(b, undefined, { numeric: true })));
writeFileSync(`${indexPath}.tmp`, `${JSON.stringify({ releases: sorted }, null, 2)}\n`);
renameSync(`${indexPath}.tmp`, indexPath);
