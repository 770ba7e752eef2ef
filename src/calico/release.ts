/**
 * Loading a Calico release's manifests (the target of a plan): from the releases cni-rewind ships
 * (calico-releases/, see shipped.ts), from a local directory (air-gapped), or from the release URL pattern of
 * projectcalico/calico.
 *
 * Layouts understood for a directory:
 *   <dir>/<X.Y.Z>/manifests/*.yaml   (the fixtures layout; `v<X.Y.Z>` also accepted)
 *   <dir>/<X.Y.Z>/*.yaml
 *   <dir>/*.yaml                     (a folder holding the files directly)
 * Each file may also be gzipped (`<name>.gz`), as the shipped ones are.
 * Files: tigera-operator.yaml (operator installs; up to 3.29 it embeds every CRD), operator-crds.yaml (3.30+: the
 * CRDs, no longer in tigera-operator.yaml), custom-resources.yaml (Installation, APIServer, ...), calico.yaml
 * (manifest installs).
 */
import { createHash } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { BadInputError, EnvironmentError } from '../core/errors.js';
import { readInputFile } from '../io/safe-file.js';
import { httpGet, type HttpGetResponse } from '../net/http-get.js';
import { parseManifests } from '../kube/manifests.js';
import type { KubeObject } from '../kube/types.js';
import { readShippedFile, shippedReleases, shippedReleasesDir } from './shipped.js';
import { compareVersions, imageTag, normalizeVersion, OPERATOR_DEPLOYMENT, OPERATOR_VERSIONS } from './knowledge.js';

/** Raw manifests of projectcalico/calico at a release tag; `{version}` is `vX.Y.Z`. */
export const RELEASE_URL_PATTERN = 'https://raw.githubusercontent.com/projectcalico/calico/{version}/manifests/';

/**
 * The commands that install a release's tigera operator again as its docs do, server-side: its CRDs are too large
 * for a client-side apply's annotation, and a server-side apply also takes over objects that still exist (a CRD
 * still Terminating). From 3.30 the CRDs are in operator-crds.yaml, no longer in tigera-operator.yaml.
 */
export function operatorInstallCommands(version: string): string[] {
  const v = normalizeVersion(version);
  const base = RELEASE_URL_PATTERN.replace('{version}', v);
  const files = compareVersions(v, 'v3.30.0') >= 0 ? [RELEASE_FILES.operatorCrds, RELEASE_FILES.operator] : [RELEASE_FILES.operator];
  return files.map((f) => `kubectl apply --server-side --force-conflicts -f ${base}${f}`);
}

export const RELEASE_FILES = {
  operator: 'tigera-operator.yaml',
  operatorCrds: 'operator-crds.yaml',
  customResources: 'custom-resources.yaml',
  calico: 'calico.yaml',
} as const;

/** The manifest install on the etcd datastore; apart from RELEASE_FILES so that only `need: 'etcd'` reads it. */
export const CALICO_ETCD_FILE = 'calico-etcd.yaml';

export interface ReleaseFile {
  /** Where it was read from: a path or a URL. */
  source: string;
  sha256: string;
  bytes: number;
}

export interface Release {
  /** `vX.Y.Z` */
  version: string;
  /** `quay.io/tigera/operator:v1.32.10`, when the release has operator manifests. */
  operatorImage?: string;
  /** Every CRD of the operator install (tigera-operator.yaml, or operator-crds.yaml from 3.30); calico.yaml's CRDs for a manifest-only release (and with `need: 'manifest'`, which reads calico.yaml only). */
  crds: KubeObject[];
  /** tigera-operator.yaml minus its CRDs (namespace, RBAC, the operator Deployment). */
  operatorObjects: KubeObject[];
  /** custom-resources.yaml (Installation, APIServer, ...). Empty when the file is absent. */
  customResources: KubeObject[];
  /** calico.yaml in full (its CRDs included), when present: the manifest-install target. */
  calicoManifest?: KubeObject[];
  /** calico-etcd.yaml in full (the manifest install on the etcd datastore), read only with `need: 'etcd'`. */
  calicoEtcdManifest?: KubeObject[];
  /** The files read, by name, with their checksums (a plan records them so `apply` uses the same manifests). */
  files: Record<string, ReleaseFile>;
  /** Where the release came from: a directory or a base URL. */
  origin: string;
}

export interface LoadReleaseOptions {
  /** A directory (see the layouts above) or a URL; default: the shipped release when the version is one of them, else the release URL. */
  manifests?: string;
  /**
   * Which install the caller needs: fail clearly when its files are missing. `etcd`: calico-etcd.yaml (the local
   * cluster's etcd-datastore install), read besides calico.yaml only then, so no plan records or checks it.
   */
  need?: 'operator' | 'manifest' | 'etcd';
  /** For tests and air-gapped checks: refuse to go to the network. */
  offline?: boolean;
}

/** Load a Calico release's manifests. Bad or missing files give one clear BadInputError. */
export async function loadRelease(version: string, opts: LoadReleaseOptions = {}): Promise<Release> {
  if (!/^v?\d+\.\d+\.\d+$/.test(version)) throw new BadInputError(`"${version}" is not a Calico version (expected X.Y.Z, e.g. 3.27.4)`);
  const v = normalizeVersion(version);
  const fetcher = opts.manifests
    ? isUrl(opts.manifests)
      ? urlFetcher(opts.manifests, v, opts.offline)
      : dirFetcher(opts.manifests, v)
    : shippedVersions().includes(v)
      ? shippedFetcher(v)
      : urlFetcher(RELEASE_URL_PATTERN, v, opts.offline);
  const texts: Partial<Record<keyof typeof RELEASE_FILES, { text: string; file: ReleaseFile }>> = {};
  for (const [key, name] of Object.entries(RELEASE_FILES) as [keyof typeof RELEASE_FILES, string][]) {
    // operator-crds.yaml exists from 3.26, but up to 3.29 tigera-operator.yaml embeds the same CRDs: read it below
    // only when tigera-operator.yaml has none (3.30+), so a plan records and checks just the files it uses.
    if (key === 'operatorCrds') continue;
    // A manifest install needs calico.yaml alone: when the folder also holds tigera-operator.yaml (the fixtures
    // do), its operator.tigera.io CRDs and operator image are no part of the target, nor of the plan's checksums.
    if (key === 'operator' && (opts.need === 'manifest' || opts.need === 'etcd')) continue;
    const got = await fetcher.read(name);
    if (got) texts[key] = got;
  }
  const parse = (key: keyof typeof RELEASE_FILES) => {
    const t = texts[key];
    return t ? parseManifests(t.text, t.file.source) : undefined;
  };
  const operatorAll = parse('operator');
  const calicoAll = parse('calico');
  const customResources = parse('customResources') ?? [];
  if (!operatorAll && !calicoAll) {
    throw new BadInputError(`no Calico ${v} manifests in ${fetcher.where}: neither ${RELEASE_FILES.operator} nor ${RELEASE_FILES.calico} found`, {
      hint: `--manifests takes a folder holding ${RELEASE_FILES.operator} (and ${RELEASE_FILES.customResources}), a folder with <version>/manifests/ under it, or a URL`,
    });
  }
  if (opts.need === 'operator' && !operatorAll) throw missingFile(RELEASE_FILES.operator, fetcher.where, v, 'an operator install');
  if (opts.need === 'manifest' && !calicoAll) throw missingFile(RELEASE_FILES.calico, fetcher.where, v, 'a manifest install');

  let crds: KubeObject[] = [];
  let operatorObjects: KubeObject[] = [];
  let operatorImage: string | undefined;
  if (operatorAll) {
    crds = operatorAll.filter(isCrd);
    operatorObjects = operatorAll.filter((o) => !isCrd(o));
    operatorImage = operatorImageOf(operatorObjects);
    if (!operatorImage)
      throw new BadInputError(`${texts.operator!.file.source} has no ${OPERATOR_DEPLOYMENT} Deployment: it is not a tigera-operator manifest`);
    checkOperatorVersion(operatorImage, v, texts.operator!.file.source);
    if (crds.length === 0) {
      const got = await fetcher.read(RELEASE_FILES.operatorCrds);
      if (!got) {
        throw new BadInputError(`${RELEASE_FILES.operator} of ${v} holds no CRDs and ${RELEASE_FILES.operatorCrds} is missing from ${fetcher.where}`, {
          hint: `from Calico 3.30 the CRDs ship in ${RELEASE_FILES.operatorCrds}; put it beside ${RELEASE_FILES.operator}`,
        });
      }
      texts.operatorCrds = got;
      const objs = parseManifests(got.text, got.file.source);
      crds = objs.filter(isCrd);
      if (crds.length === 0 || crds.length !== objs.length) throw new BadInputError(`${got.file.source} should hold CustomResourceDefinitions only`);
    }
  }
  if (calicoAll) {
    checkCalicoNodeVersion(calicoAll, v, texts.calico!.file.source);
    if (!operatorAll) crds = calicoAll.filter(isCrd);
  }
  for (const o of customResources) {
    if (!o.apiVersion.startsWith('operator.tigera.io/')) {
      throw new BadInputError(
        `${texts.customResources!.file.source} holds ${o.kind} ${o.metadata.name}: custom-resources.yaml should only hold operator.tigera.io resources`,
      );
    }
  }
  const files: Record<string, ReleaseFile> = {};
  for (const [key, t] of Object.entries(texts)) if (t) files[RELEASE_FILES[key as keyof typeof RELEASE_FILES]] = t.file;
  let calicoEtcdManifest: KubeObject[] | undefined;
  if (opts.need === 'etcd') {
    const got = await fetcher.read(CALICO_ETCD_FILE);
    if (!got) throw missingFile(CALICO_ETCD_FILE, fetcher.where, v, 'a manifest install on the etcd datastore');
    calicoEtcdManifest = parseManifests(got.text, got.file.source);
    checkCalicoNodeVersion(calicoEtcdManifest, v, got.file.source);
    files[CALICO_ETCD_FILE] = got.file;
  }
  return { version: v, operatorImage, crds, operatorObjects, customResources, calicoManifest: calicoAll, calicoEtcdManifest, files, origin: fetcher.where };
}

/** The versions cni-rewind ships manifests for, `vX.Y.Z`, oldest first. */
export function shippedVersions(): string[] {
  return shippedReleases().map((r) => `v${r.version}`);
}

const isCrd = (o: KubeObject) => o.kind === 'CustomResourceDefinition';
const isUrl = (s: string) => /^https?:\/\//i.test(s);

function missingFile(name: string, where: string, v: string, what: string): BadInputError {
  return new BadInputError(`${name} for Calico ${v} not found in ${where}; it is needed for ${what}`);
}

function operatorImageOf(objs: KubeObject[]): string | undefined {
  const dep = objs.find((o) => o.kind === 'Deployment' && o.metadata.name === OPERATOR_DEPLOYMENT);
  const cs: any[] = dep?.spec?.template?.spec?.containers ?? [];
  return (cs.find((c) => c.name === OPERATOR_DEPLOYMENT) ?? cs[0])?.image;
}

/** A tigera-operator.yaml of another release is the classic wrong file: catch it by the operator image. */
function checkOperatorVersion(image: string, v: string, source: string): void {
  const expected = OPERATOR_VERSIONS[v];
  const tag = imageTag(image);
  if (!expected || !tag || tag === expected) return;
  const actual = Object.entries(OPERATOR_VERSIONS).find(([, op]) => op === tag)?.[0];
  throw new BadInputError(
    `${source} is not Calico ${v}'s operator manifest: it runs operator ${tag}${actual ? ` (Calico ${actual})` : ''}, ${v} uses ${expected}`,
  );
}

function checkCalicoNodeVersion(objs: KubeObject[], v: string, source: string): void {
  const ds = objs.find((o) => o.kind === 'DaemonSet' && o.metadata.name === 'calico-node');
  if (!ds) throw new BadInputError(`${source} has no calico-node DaemonSet: it is not a Calico calico.yaml`);
  const cs: any[] = ds.spec?.template?.spec?.containers ?? [];
  const tag = imageTag((cs.find((c) => c.name === 'calico-node') ?? cs[0])?.image);
  if (tag && /^v\d+\.\d+\.\d+$/.test(tag) && tag !== v) throw new BadInputError(`${source} is not Calico ${v}'s calico.yaml: it runs calico/node ${tag}`);
}

interface Fetcher {
  where: string;
  /** The file's text, or undefined when it does not exist. */
  read(name: string): Promise<{ text: string; file: ReleaseFile } | undefined>;
}

/**
 * The most a release manifest may hold, read or unpacked: the largest Calico ships is under 2 MiB. A FIFO,
 * /dev/zero, a small .gz that unpacks to gigabytes or an endless answer fail in one line instead.
 */
export const MAX_RELEASE_FILE_BYTES = 32 * 1024 * 1024;

function fileRecord(source: string, text: string): ReleaseFile {
  return { source, sha256: createHash('sha256').update(text).digest('hex'), bytes: Buffer.byteLength(text) };
}

function dirFetcher(root: string, v: string): Fetcher {
  const abs = path.resolve(root);
  if (!existsSync(abs)) throw new BadInputError(`manifests folder ${root} does not exist`);
  if (!statSync(abs).isDirectory()) {
    throw new BadInputError(`--manifests ${root} is a file; give the folder that holds ${RELEASE_FILES.operator} (or ${RELEASE_FILES.calico})`);
  }
  const bare = v.slice(1);
  const candidates = [
    path.join(abs, bare, 'manifests'),
    path.join(abs, v, 'manifests'),
    path.join(abs, bare),
    path.join(abs, v),
    path.join(abs, 'manifests'),
    abs,
  ];
  const has = (d: string, f: string) => existsSync(path.join(d, f)) || existsSync(path.join(d, `${f}.gz`));
  const hasRelease = (d: string) => has(d, RELEASE_FILES.operator) || has(d, RELEASE_FILES.calico);
  const dir = candidates.find(hasRelease);
  if (!dir) {
    throw new BadInputError(
      `no Calico ${v} manifests under ${root}: looked for ${RELEASE_FILES.operator} or ${RELEASE_FILES.calico} in ${bare}/manifests/, ${bare}/ and the folder itself`,
    );
  }
  return {
    where: dir,
    async read(name) {
      const p = path.join(dir, name);
      if (existsSync(p)) {
        const text = readInputFile(p, 'release manifest', MAX_RELEASE_FILE_BYTES).data.toString('utf8');
        return { text, file: fileRecord(p, text) };
      }
      if (!existsSync(`${p}.gz`)) return undefined;
      const packed = readInputFile(`${p}.gz`, 'release manifest', MAX_RELEASE_FILE_BYTES).data;
      let text: string;
      try {
        text = gunzipSync(packed, { maxOutputLength: MAX_RELEASE_FILE_BYTES }).toString('utf8');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE')
          throw new BadInputError(`${p}.gz unpacks to more than ${MAX_RELEASE_FILE_BYTES} bytes; not a release manifest`);
        throw new BadInputError(`${p}.gz is not a readable gzip file: ${(err as Error).message}`);
      }
      return { text, file: fileRecord(`${p}.gz`, text) };
    },
  };
}

/** The copy shipped in the package: checked against its index on every read. */
function shippedFetcher(v: string): Fetcher {
  const where = path.join(shippedReleasesDir(), v.slice(1));
  return {
    where,
    async read(name) {
      const got = readShippedFile(v, name);
      return got && { text: got.text, file: { source: got.path, sha256: got.sha256, bytes: got.bytes } };
    },
  };
}

/** `{version}` in the URL is replaced; a URL ending in `/manifests` holds the files; any other URL is a repository root (`<url>/vX.Y.Z/manifests/`). */
export function releaseBaseUrl(url: string, v: string): string {
  if (url.includes('{version}')) return url.replaceAll('{version}', v).replace(/\/?$/, '/');
  const trimmed = url.replace(/\/+$/, '');
  if (/\/manifests$/.test(trimmed)) return `${trimmed}/`;
  return `${trimmed}/${v}/manifests/`;
}

function urlFetcher(url: string, v: string, offline?: boolean): Fetcher {
  const base = releaseBaseUrl(url, v);
  return {
    where: base,
    async read(name) {
      if (offline) throw new EnvironmentError(`Calico ${v} manifests would have to be fetched from ${base}, and the network is not allowed here`);
      const target = base + name;
      let res: HttpGetResponse;
      try {
        res = await httpGet(target, { timeoutMs: 60_000 });
      } catch (err) {
        throw new EnvironmentError(`cannot fetch ${target}: ${(err as Error).message}`, {
          hint: 'for an air-gapped cluster, download the release manifests and pass --manifests <folder>',
        });
      }
      if (res.status === 404) return undefined;
      if (!res.ok) throw new EnvironmentError(`fetching ${target} answered HTTP ${res.status}`);
      let text: string;
      try {
        text = await res.text(MAX_RELEASE_FILE_BYTES);
      } catch (err) {
        throw new EnvironmentError(`cannot fetch ${target}: ${(err as Error).message}`);
      }
      return { text, file: fileRecord(target, text) };
    },
  };
}
