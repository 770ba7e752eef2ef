// @ts-check
/**
 * Example third-party cni-rewind provider: "qcow2-files". It snapshots plain qcow2 image files (for example the
 * disks of VMs managed by a hand-written qemu script) with `qemu-img snapshot`, and depends on nothing but Node
 * and qemu-img. Load it with `cni-rewind backup --provider-module ./examples/third-party-provider/index.js`
 * (or, once published, `--provider-module cni-rewind-provider-qcow2-files`).
 *
 * Config (providers.qcow2-files in the cni-rewind config file):
 *   imagesDir: /var/lib/vms        a node's images default to <imagesDir>/<node>.qcow2
 * Node mapping entry: { provider: qcow2-files, images: [/path/a.qcow2, /path/b.qcow2] }
 *
 * qemu-img snapshots have only a name, so the tags (bundle, cluster, node) are kept in a sidecar file
 * `<image>.cni-rewind.json` next to each image, written atomically. The images must not be in use by a running
 * VM while they are snapshotted or reverted (qemu-img takes a write lock and says so).
 *
 * The contract is src/providers/types.ts (PROVIDER_API_VERSION 'cni-rewind.provider/v1'); it is restated in
 * the JSDoc types below so this file needs nothing from cni-rewind at run time.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';

/** @typedef {{ name: string, providerID?: string, labels: Record<string,string>, annotations: Record<string,string> }} NodeInfo */
/** @typedef {{ node: string, provider: string, machine: string, location: Record<string,string> }} NodeTarget */
/** @typedef {{ provider: string, node: string, machine: string, disk: string, device: string, boot?: boolean, snapshotId: string, sizeGiB?: number, state: 'pending'|'completed'|'failed'|'deleted', created: string, location?: Record<string,string>, details?: Record<string,unknown> }} SnapshotRecord */
/** @typedef {{ bundleId: string, clusterId: string, node: string }} SnapshotTags */
/** @typedef {{ reporter: { info(code: string, msg: string, data?: unknown): void, debug(code: string, msg: string, data?: unknown): void }, config: Record<string, unknown> }} ProviderContext */

const NAME = 'qcow2-files';

/** An error with a clear one-line message (cni-rewind reports it for the node); exitCode says what kind (4 environment, 2 bad input, 5 refused). */
class ProviderError extends Error {
  /** @param {string} message @param {number} exitCode */
  constructor(message, exitCode) {
    super(message);
    this.exitCode = exitCode;
  }
}

/** @param {string[]} args @returns {Promise<string>} */
function qemuImg(args) {
  return new Promise((resolve, reject) => {
    execFile('qemu-img', args, { timeout: 600_000 }, (err, stdout, stderr) => {
      if (!err) return resolve(stdout);
      if (/** @type {NodeJS.ErrnoException} */ (err).code === 'ENOENT') return reject(new ProviderError('qcow2-files: qemu-img is not installed', 4));
      reject(new ProviderError(`qcow2-files: qemu-img ${args[0]} ${args[1] ?? ''} failed: ${String(stderr).trim() || err.message}`, 4));
    });
  });
}

const sidecarOf = (/** @type {string} */ image) => `${image}.cni-rewind.json`;

/** @param {string} image @returns {Promise<Record<string, SnapshotTags & { created: string }>>} */
async function readSidecar(image) {
  try {
    return JSON.parse(await readFile(sidecarOf(image), 'utf8'));
  } catch {
    return {};
  }
}

/** @param {string} image @param {Record<string, unknown>} data */
async function writeSidecar(image, data) {
  const tmp = `${sidecarOf(image)}.tmp-${process.pid}`;
  await writeFile(tmp, JSON.stringify(data, null, 2));
  await rename(tmp, sidecarOf(image));
}

/** @param {string} image @returns {Promise<string[]>} */
async function snapshotNames(image) {
  const info = JSON.parse(await qemuImg(['info', '--force-share', '--output=json', image]));
  if (info.format !== 'qcow2') throw new ProviderError(`qcow2-files: ${image} is ${info.format}, not qcow2`, 2);
  return (info.snapshots ?? []).map((/** @type {{name: string}} */ s) => s.name);
}

/** @param {ProviderContext} ctx */
function create(ctx) {
  const imagesDir = typeof ctx.config.imagesDir === 'string' ? ctx.config.imagesDir : undefined;

  return {
    name: NAME,

    /** @param {NodeInfo} node @param {Record<string, unknown>} [mapping] @returns {Promise<NodeTarget|undefined>} */
    async resolve(node, mapping) {
      const images = Array.isArray(mapping?.images) ? mapping.images.map(String) : imagesDir ? [path.join(imagesDir, `${node.name}.qcow2`)] : [];
      if (!images.length || !images.every((i) => existsSync(i))) return undefined;
      return { node: node.name, provider: NAME, machine: images.join(','), location: { images: images.join(',') } };
    },

    /** @param {NodeTarget} target @param {SnapshotTags} tags @returns {Promise<SnapshotRecord[]>} */
    async snapshot(target, tags) {
      const snap = `cnr.${tags.bundleId}`;
      const created = new Date().toISOString();
      const images = target.location.images.split(',');
      /** @type {SnapshotRecord[]} */
      const records = [];
      for (const [i, image] of images.entries()) {
        if ((await snapshotNames(image)).includes(snap)) throw new ProviderError(`qcow2-files: ${image} already has snapshot ${snap}`, 5);
        await qemuImg(['snapshot', '-c', snap, image]);
        await writeSidecar(image, { ...(await readSidecar(image)), [snap]: { ...tags, created } });
        ctx.reporter.debug('CNR_EXT_QCOW2_SNAPSHOT', `qcow2-files: snapshot ${snap} of ${image}`);
        records.push({ provider: NAME, node: target.node, machine: target.machine, disk: image, device: `disk${i}`, boot: i === 0, snapshotId: snap, state: 'completed', created, location: { image } });
      }
      return records;
    },

    /** qemu-img snapshot -c is synchronous: check the snapshots are there. @param {SnapshotRecord[]} records */
    async waitUsable(records) {
      for (const r of records) {
        if (!(await snapshotNames(r.disk)).includes(r.snapshotId)) throw new ProviderError(`qcow2-files: snapshot ${r.snapshotId} of ${r.disk} is missing`, 4);
      }
      return records.map((r) => ({ ...r, state: /** @type {const} */ ('completed') }));
    },

    /** @param {NodeTarget} target @param {SnapshotRecord[]} records @param {{ devices?: string[] }} opts */
    async restoreDisks(target, records, opts) {
      const mine = records.filter((r) => r.node === target.node && (!opts.devices || opts.devices.includes(r.device)));
      for (const r of mine) {
        await qemuImg(['snapshot', '-a', r.snapshotId, r.disk]);
        ctx.reporter.info('CNR_EXT_QCOW2_REVERT', `qcow2-files: ${r.disk} reverted to ${r.snapshotId}`);
      }
      return { node: target.node, restored: mine.map((r) => ({ device: r.device, snapshotId: r.snapshotId })), notes: [] };
    },

    async reboot() {
      throw new ProviderError('qcow2-files: cannot reboot a machine (it only knows image files)', 4);
    },

    /** @param {{ bundleId?: string, clusterId?: string, createdBefore?: Date }} filter */
    async list(filter) {
      if (!imagesDir) return [];
      const { readdir } = await import('node:fs/promises');
      /** @type {SnapshotRecord[]} */
      const out = [];
      for (const f of (await readdir(imagesDir)).filter((x) => x.endsWith('.qcow2'))) {
        const image = path.join(imagesDir, f);
        const tags = await readSidecar(image);
        const present = new Set(await snapshotNames(image));
        for (const [snap, t] of Object.entries(tags)) {
          if (!present.has(snap)) continue;
          if (filter.bundleId && t.bundleId !== filter.bundleId) continue;
          if (filter.clusterId && t.clusterId !== filter.clusterId) continue;
          if (filter.createdBefore && new Date(t.created) >= filter.createdBefore) continue;
          out.push({ provider: NAME, node: t.node, machine: image, disk: image, device: 'disk', snapshotId: snap, state: 'completed', created: t.created, location: { image }, details: { bundleId: t.bundleId, clusterId: t.clusterId } });
        }
      }
      return out;
    },

    /** @param {SnapshotRecord[]} records */
    async delete(records) {
      for (const r of records) {
        if (!existsSync(r.disk) || !(await snapshotNames(r.disk)).includes(r.snapshotId)) continue;
        await qemuImg(['snapshot', '-d', r.snapshotId, r.disk]);
        const tags = await readSidecar(r.disk);
        delete tags[r.snapshotId];
        await writeSidecar(r.disk, tags);
      }
    },
  };
}

/** The module cni-rewind loads: apiVersion must match the interface version this provider was written for. */
export default { apiVersion: 'cni-rewind.provider/v1', name: NAME, create };
