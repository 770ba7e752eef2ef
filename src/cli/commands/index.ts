import type { Command } from '../context.js';
import { diffCommand } from './diff.js';
import { doctorCommand } from './doctor.js';
import { exportCommand } from './export.js';
import { inspectCommand } from './inspect.js';
import { listCommand } from './list.js';
import { pruneCommand } from './prune.js';
import { verifyCommand } from './verify.js';
import { backupCommand } from './backup.js';
import { snapshotsCommand } from './snapshots.js';
import { restoreCommand } from './restore.js';
import { applyCommand } from './apply.js';
import { planCommand } from './plan.js';
import { statusCommand } from './status.js';
import { wrapCommand } from './wrap.js';
import { versionCommand } from './version.js';
import { releasesCommand } from './releases.js';

/** Every CLI command, in the order `--help` lists them. Add new commands here. */
export const commands: Command<any>[] = [versionCommand, statusCommand, backupCommand, snapshotsCommand];
commands.push(exportCommand, inspectCommand, verifyCommand, listCommand, pruneCommand, diffCommand);
commands.push(doctorCommand);
commands.push(restoreCommand);
commands.push(planCommand, applyCommand, wrapCommand, releasesCommand);
import { demoCommand } from './demo.js';
commands.push(demoCommand);
