/**
 * A real libvirtd for the tests, from Debian's packages, started without systemd (no systemd in a CI container):
 * log dirs and the libvirt-qemu user that libvirt-daemon-system would normally create,
 * then `virtlogd -d` and `libvirtd -d`. Reuses a daemon that already answers; stops only what it started, by PID.
 * Domains are `<domain type='qemu'>` (TCG, no /dev/kvm) with qcow2 disks made by qemu-img; no OS is needed.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { promisify } from 'node:util';

const run = promisify(execFile);
export const SYSTEM_URI = 'qemu:///system';
export const IMAGES_DIR = '/var/lib/libvirt/images';

export interface LibvirtdHandle {
  uri: string;
  version: string;
  stop(): Promise<void>;
}

function fail(what: string): never {
  throw new Error(`libvirtd test setup: ${what} (run bash test/prereqs.sh as root; npm test does)`);
}

async function answers(): Promise<string | undefined> {
  try {
    const { stdout } = await run('virsh', ['-c', SYSTEM_URI, 'version', '--daemon'], { timeout: 10_000 });
    return /Running against daemon:\s*(\S+)/.exec(stdout)?.[1];
  } catch {
    return undefined;
  }
}

function ensureAccount(): void {
  const has = (db: string, name: string) =>
    readFileSync(db, 'utf8')
      .split('\n')
      .some((l) => l.startsWith(`${name}:`));
  if (!has('/etc/group', 'libvirt-qemu')) execFileSync('groupadd', ['-r', 'libvirt-qemu']);
  if (!has('/etc/passwd', 'libvirt-qemu'))
    execFileSync('useradd', ['-r', '-g', 'libvirt-qemu', '-d', '/var/lib/libvirt', '-s', '/usr/sbin/nologin', 'libvirt-qemu']);
  if (!has('/etc/group', 'libvirt')) execFileSync('groupadd', ['-r', 'libvirt']);
}

const pidOf = (file: string) => (existsSync(file) ? Number(readFileSync(file, 'utf8').trim()) : undefined);

export async function startLibvirtd(): Promise<LibvirtdHandle> {
  for (const b of ['/usr/sbin/libvirtd', '/usr/sbin/virtlogd', '/usr/bin/virsh', '/usr/bin/qemu-img', '/usr/bin/qemu-io', '/usr/bin/qemu-system-x86_64']) {
    if (!existsSync(b)) fail(`${b} is missing`);
  }
  const running = await answers();
  if (running) return { uri: SYSTEM_URI, version: running, stop: async () => {} };
  if (process.getuid?.() !== 0) fail('starting libvirtd for qemu:///system needs root');
  mkdirSync('/var/log/libvirt/qemu', { recursive: true });
  mkdirSync(IMAGES_DIR, { recursive: true });
  ensureAccount();
  const started: number[] = [];
  if (!pidOf('/run/virtlogd.pid') || !existsSync(`/proc/${pidOf('/run/virtlogd.pid')}`)) {
    await run('/usr/sbin/virtlogd', ['-d']);
    const p = pidOf('/run/virtlogd.pid');
    if (p) started.push(p);
  }
  await run('/usr/sbin/libvirtd', ['-d']);
  const lp = pidOf('/run/libvirtd.pid');
  if (lp) started.push(lp);
  let version: string | undefined;
  for (let i = 0; i < 50 && !version; i++) {
    version = await answers();
    if (!version) await new Promise((r) => setTimeout(r, 200));
  }
  if (!version) fail('libvirtd did not answer on qemu:///system within 10 s (see /var/log/libvirt)');
  return {
    uri: SYSTEM_URI,
    version,
    async stop() {
      for (const pid of started.reverse()) {
        try {
          process.kill(pid, 'SIGTERM');
        } catch {
          /* already gone */
        }
      }
    },
  };
}

/** Define a TCG domain with one qcow2 disk per entry of `disks` (each `size` big), shut off. */
export async function defineTestDomain(
  name: string,
  opts: { disks?: string[]; size?: string; format?: 'qcow2' | 'raw' } = {},
): Promise<{ name: string; files: string[] }> {
  const format = opts.format ?? 'qcow2';
  const targets = opts.disks ?? ['vda'];
  const files: string[] = [];
  let diskXml = '';
  for (const t of targets) {
    const file = `${IMAGES_DIR}/cnr-test-${name}-${t}.${format}`;
    await run('qemu-img', ['create', '-q', '-f', format, file, opts.size ?? '64M']);
    files.push(file);
    diskXml += `<disk type='file' device='disk'><driver name='qemu' type='${format}'/><source file='${file}'/><target dev='${t}' bus='virtio'/></disk>`;
  }
  const xml = `<domain type='qemu'><name>${name}</name><memory unit='MiB'>128</memory><vcpu>1</vcpu>
<os><type arch='x86_64' machine='pc'>hvm</type></os><devices>${diskXml}</devices></domain>`;
  const xmlFile = `${IMAGES_DIR}/cnr-test-${name}.xml`;
  writeFileSync(xmlFile, xml);
  await run('virsh', ['-c', SYSTEM_URI, 'define', xmlFile]);
  return { name, files };
}

/** Remove a test domain, its snapshot metadata and its disk files (and any overlays next to them). */
export async function removeTestDomain(name: string): Promise<void> {
  await run('virsh', ['-c', SYSTEM_URI, 'destroy', name]).catch(() => undefined);
  await run('virsh', ['-c', SYSTEM_URI, 'undefine', name, '--snapshots-metadata']).catch(() => undefined);
  for (const f of readdirSync(IMAGES_DIR)) if (f.startsWith(`cnr-test-${name}`) || f.startsWith(`${name}.cnr-`)) rmSync(`${IMAGES_DIR}/${f}`, { force: true });
}

/** qemu-io on a disk image: write or read-verify a byte pattern (`-U` reads an image a running VM holds). */
export async function qemuIo(file: string, op: 'write' | 'read', pattern: number, offset = 0, length = '1M', format = 'qcow2'): Promise<boolean> {
  const args = ['-f', format, ...(op === 'read' ? ['-r', '-U'] : []), '-c', `${op} -P 0x${pattern.toString(16)} ${offset} ${length}`, file];
  try {
    const { stdout } = await run('qemu-io', args);
    return !/Pattern verification failed/.test(stdout);
  } catch (err) {
    if (op === 'read' && /Pattern verification failed/.test(String((err as { stdout?: string }).stdout ?? ''))) return false;
    throw err;
  }
}
