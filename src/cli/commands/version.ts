import { toolVersion } from '../../core/version.js';
import { handler, type Command } from '../context.js';
import { BUNDLE_FORMAT_VERSION } from '../../bundle/format.js';

export const versionCommand: Command = {
  command: 'version',
  describe: 'Print the tool version and the bundle format version',
  handler: handler(async (ctx) => {
    const data = { version: toolVersion(), bundleFormatVersion: BUNDLE_FORMAT_VERSION, node: process.version };
    ctx.print(data, () => `cni-rewind ${data.version} (bundle format ${data.bundleFormatVersion}, node ${data.node})`);
  }),
};
