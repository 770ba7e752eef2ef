import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';

/**
 * The demo's "node disks": one small qcow2 image per node, snapshotted by the example third-party provider
 * (examples/third-party-provider, qemu-img internal snapshots). Data is written and checked with qemu-io.
 */
export function hasQemuTools(): boolean {
  try {
    execFileSync('qemu-img', ['--version'], { stdio: 'ignore' });
    execFileSync('qemu-io', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export function makeNodeImages(dir: string, nodes: string[]): string[] {
  mkdirSync(dir, { recursive: true });
  return nodes.map((n) => {
    const file = path.join(dir, `${n}.qcow2`);
    execFileSync('qemu-img', ['create', '-q', '-f', 'qcow2', file, '16M']);
    // A recognisable pattern the backup will capture.
    execFileSync('qemu-io', ['-f', 'qcow2', '-c', 'write -P 0x11 0 1M', file], { stdio: 'ignore' });
    return file;
  });
}

export function writePattern(file: string, byte: number): void {
  execFileSync('qemu-io', ['-f', 'qcow2', '-c', `write -P 0x${byte.toString(16)} 0 1M`, file], { stdio: 'ignore' });
}

/** True when the first MiB of the image holds `byte` everywhere. */
export function hasPattern(file: string, byte: number): boolean {
  const out = execFileSync('qemu-io', ['-f', 'qcow2', '-c', `read -P 0x${byte.toString(16)} 0 1M`, file], { encoding: 'utf8' });
  return !/Pattern verification failed/.test(out);
}
