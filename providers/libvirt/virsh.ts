/**
 * Runs `virsh -c URI ...` as a child process. One process per call: every libvirt URI a user can reach with
 * virsh (qemu:///system, qemu+ssh://user@host/system, ...) works the same way, with the user's own ssh setup.
 * (The `test:///` driver keeps its state per connection, so it only fits `batch()`, which runs several
 * commands in one virsh process.)
 */
import { execFile } from 'node:child_process';
import { EnvironmentError } from '../../src/provider-kit/index.js';

export interface VirshOptions {
  /** The virsh binary (default `virsh` from PATH). */
  binary?: string;
  timeoutMs?: number;
}

export class VirshError extends EnvironmentError {
  constructor(
    message: string,
    /** virsh's own error text, e.g. "Domain not found: no domain with matching name 'x'". */
    readonly virshMessage: string,
  ) {
    super(message);
  }
}

export class Virsh {
  constructor(
    readonly uri: string,
    private readonly opts: VirshOptions = {},
  ) {}

  run(args: string[]): Promise<string> {
    const bin = this.opts.binary ?? 'virsh';
    return new Promise((resolve, reject) => {
      execFile(bin, ['-q', '-c', this.uri, ...args], { timeout: this.opts.timeoutMs ?? 600_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
        if (!err) return resolve(stdout);
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
          return reject(
            new EnvironmentError(`libvirt: '${bin}' was not found on PATH`, {
              hint: 'Install libvirt-clients (Debian/Ubuntu) or libvirt-client (Fedora/RHEL).',
            }),
          );
        }
        // virsh prints "error: <summary>\nerror: <detail>"; the detail names the actual cause.
        const lines = String(stderr)
          .split('\n')
          .map((l) => l.replace(/^error:\s*/, '').trim())
          .filter(Boolean);
        const detail = lines.join(': ') || err.message;
        reject(new VirshError(`libvirt (${this.uri}): virsh ${args[0]} failed: ${detail}`, detail));
      });
    });
  }

  /** Several commands in one virsh process (one connection): `virsh -c URI 'cmd1; cmd2'`. */
  batch(commands: string[][]): Promise<string> {
    const quote = (a: string) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`);
    return this.run([commands.map((c) => c.map(quote).join(' ')).join(' ; ')]);
  }
}

/** `virsh version --daemon` -> the libvirt version of the daemon actually serving the URI. */
export function parseDaemonVersion(out: string): [number, number, number] | undefined {
  const m = /Running against daemon:\s*(\d+)\.(\d+)\.(\d+)/.exec(out) ?? /Using library: libvirt (\d+)\.(\d+)\.(\d+)/.exec(out);
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : undefined;
}

const xmlText = (s: string): string =>
  s
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&amp;/g, '&');

export interface DomainDisk {
  /** Target device, e.g. `vda`. */
  target: string;
  /** Backing file, block device or volume; undefined for an empty cdrom. */
  source?: string;
  /** Image format from `<driver type=...>`: qcow2, raw, ... */
  format?: string;
  /** disk | cdrom | floppy | lun */
  device: string;
}

/** The `<disk>` elements of `virsh dumpxml D` (the live or inactive definition). */
export function parseDomainDisks(xml: string): DomainDisk[] {
  const disks: DomainDisk[] = [];
  for (const m of xml.matchAll(/<disk\b([^>]*)>([\s\S]*?)<\/disk>/g)) {
    const attrs = m[1]!;
    const body = m[2]!;
    const device = /\bdevice=['"]([^'"]+)['"]/.exec(attrs)?.[1] ?? 'disk';
    const target = /<target\b[^>]*\bdev=['"]([^'"]+)['"]/.exec(body)?.[1];
    if (!target) continue;
    const source = /<source\b[^>]*\b(?:file|dev|volume|name)=['"]([^'"]+)['"]/.exec(body)?.[1];
    const format = /<driver\b[^>]*\btype=['"]([^'"]+)['"]/.exec(body)?.[1];
    disks.push({ target, source: source ? xmlText(source) : undefined, format, device });
  }
  return disks;
}

/** The bits of `virsh snapshot-dumpxml` this provider needs. */
export interface SnapshotInfo {
  name: string;
  description: string;
  creationTime?: Date;
  state?: string;
  /** internal | external, from the first disk entry. */
  kind: 'internal' | 'external' | 'unknown';
}

export function parseSnapshotXml(xml: string): SnapshotInfo {
  // Only the snapshot's own top-level elements: cut off the embedded <domain> which has its own <name>/<description>.
  const head = xml.split(/<domain[\s>]/)[0] ?? xml;
  const name = /<name>([^<]*)<\/name>/.exec(head)?.[1] ?? '';
  const description = /<description>([^<]*)<\/description>/.exec(head)?.[1] ?? '';
  const t = /<creationTime>(\d+)<\/creationTime>/.exec(head)?.[1];
  const state = /<state>([^<]*)<\/state>/.exec(head)?.[1];
  const snapAttr = /<disk\b[^>]*\bsnapshot=['"](internal|external)['"]/.exec(head)?.[1] as 'internal' | 'external' | undefined;
  return {
    name: xmlText(name),
    description: xmlText(description),
    creationTime: t ? new Date(Number(t) * 1000) : undefined,
    state,
    kind: snapAttr ?? 'unknown',
  };
}
