// @ts-check
/**
 * Example third-party cni-rewind provider: "qcow2-files". It snapshots plain qcow2 image files (for example the
 * disks of VMs managed by a hand-written qemu script) with `qemu-img snapshot`, and depends on Node, qemu-img and
 * cni-rewind's provider kit. Load it with `cni-rewind backup --provider-module ./examples/third-party-provider/index.js`
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
 * Errors: it throws the kit's branded errors, so the CLI exits with their code and prints their one line, e.g.
 * `imagesDir` that is not a folder -> BadInputError, exit 2 ("qcow2-files: imagesDir ... is not a folder");
 * qemu-img missing or failing -> EnvironmentError, exit 4; a snapshot of that name already there -> RefusedError, exit 5.
 *
 * Everything it uses from cni-rewind comes from `cni-rewind/provider` (the provider kit: the contract types and
 * the errors); see README.md next to this file for how that import resolves inside the repository, from the
 * installed package, and for a provider published as its own package.
 */
import { execFile } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { BadInputError, EnvironmentError, PROVIDER_API_VERSION, RefusedError } from 'cni-rewind/provider';

/** @typedef {import('cni-rewind/provider').NodeInfo} NodeInfo */
/** @typedef {import('cni-rewind/provider').NodeTarget} NodeTarget */
/** @typedef {import('cni-rewind/provider').SnapshotRecord} SnapshotRecord */
/** @typedef {import('cni-rewind/provider').SnapshotTags} SnapshotTags */
/** @typedef {import('cni-rewind/provider').SnapshotFilter} SnapshotFilter */
/** @typedef {import('cni-rewind/provider').NodeMappingEntry} NodeMappingEntry */
/** @typedef {import('cni-rewind/provider').RestoreDisksOptions} RestoreDisksOptions */
/** @typedef {import('cni-rewind/provider').ProviderContext} ProviderContext */
/** @typedef {import('cni-rewind/provider').SnapshotProvider} SnapshotProvider */

const NAME = 'qcow2-files';

/** @param {string[]} args @returns {Promise<string>} */
function qemuImg(args) {
  return new Promise((resolve, reject) => {
    execFile('qemu-img', args, { timeout: 600_000 }, (err, stdout, stderr) => {
      if (!err) return resolve(stdout);
      if (/** @type {NodeJS.ErrnoException} */ (err).code === 'ENOENT')
        return reject(new EnvironmentError('qcow2-files: qemu-img is not installed', { hint: 'install qemu-utils' }));
      reject(new EnvironmentError(`qcow2-files: qemu-img ${args[0]} ${args[1] ?? ''} failed: ${String(stderr).trim() || err.message}`));
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
  if (info.format !== 'qcow2') throw new BadInputError(`qcow2-files: ${image} is ${info.format}, not qcow2`);
  return (info.snapshots ?? []).map((/** @type {{name: string}} */ s) => s.name);
}

/** @param {ProviderContext} ctx @returns {SnapshotProvider} */
function create(ctx) {
  const imagesDir = typeof ctx.config.imagesDir === 'string' ? ctx.config.imagesDir : undefined;
  if (imagesDir !== undefined && !statSync(imagesDir, { throwIfNoEntry: false })?.isDirectory()) {
    throw new BadInputError(`qcow2-files: imagesDir ${imagesDir} is not a folder`, {
      hint: 'set providers.qcow2-files.imagesDir in the config file to the folder holding the node images',
    });
  }

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
        if ((await snapshotNames(image)).includes(snap)) throw new RefusedError(`qcow2-files: ${image} already has snapshot ${snap}`);
        await qemuImg(['snapshot', '-c', snap, image]);
        await writeSidecar(image, { ...(await readSidecar(image)), [snap]: { ...tags, created } });
        ctx.reporter.debug('CNR_EXT_QCOW2_SNAPSHOT', `qcow2-files: snapshot ${snap} of ${image}`);
        records.push({
          provider: NAME,
          node: target.node,
          machine: target.machine,
          disk: image,
          device: `disk${i}`,
          boot: i === 0,
          snapshotId: snap,
          state: 'completed',
          created,
          location: { image },
        });
      }
      return records;
    },

    /** qemu-img snapshot -c is synchronous: check the snapshots are there. @param {SnapshotRecord[]} records */
    async waitUsable(records) {
      for (const r of records) {
        if (!(await snapshotNames(r.disk)).includes(r.snapshotId)) throw new EnvironmentError(`qcow2-files: snapshot ${r.snapshotId} of ${r.disk} is missing`);
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
          out.push({
            provider: NAME,
            node: t.node,
            machine: image,
            disk: image,
            device: 'disk',
            snapshotId: snap,
            state: 'completed',
            created: t.created,
            location: { image },
            details: { bundleId: t.bundleId, clusterId: t.clusterId },
          });
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

/**
 * The module cni-rewind loads: apiVersion must match the interface version this provider was written for.
 * It has no `reboot` (an optional capability): it only knows image files, so plans with --reboot-nodes refuse its nodes.
 */
export default { apiVersion: PROVIDER_API_VERSION, name: NAME, create };
