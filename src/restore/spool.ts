/**
 * Where a restore plan keeps the objects it will write: a private temporary file, not the heap. A plan holds one
 * entry per object of the bundle from planning until the read-back; with each object's JSON in memory a restore
 * of 100,000 IPAM handles needed 397 MiB and grew with every object. Spooled, an entry holds two numbers (where
 * its text is), each text is read back when the object is written and once more when it is checked for drift;
 * the entry itself is a row of typed arrays when it has nothing to say (plan-table.ts; bench/restore.ts measures
 * the peak). Planning's live lists, and the IPAM merge's blocks, are kept in spools of their own the same way
 * (plan-object.ts, ipam.ts).
 *
 * Objects of the core API group (a few ConfigMaps, Secrets, Namespaces) are not spooled but kept in memory, so a
 * Secret's data, decrypted from the bundle, is never written to a temporary file; what comes by the thousand
 * (IPAM blocks, handles, affinities, policies) is of other groups.
 */
import { closeSync, mkdtempSync, openSync, readSync, rmSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** The largest text the spool's scratch buffer grows to hold. */
const SCRATCH_MAX = 1 << 20;

/** Where one entry's text is in the spool. */
export interface SpoolSlot {
  offset: number;
  length: number;
}

export class DesiredSpool {
  private fd: number | undefined;
  private dir: string | undefined;
  private end = 0;
  private buf: Buffer | undefined;

  /** Appends one text; returns where it is. */
  put(text: string): SpoolSlot {
    const fd = this.open();
    const buf = this.scratch(Buffer.byteLength(text, 'utf8'));
    const length = buf.write(text, 0, 'utf8');
    let done = 0;
    while (done < length) done += writeSync(fd, buf, done, length - done, this.end + done);
    const slot = { offset: this.end, length };
    this.end += length;
    return slot;
  }

  /** The text at `slot`. */
  get(slot: SpoolSlot): string {
    return this.read(slot.offset, slot.length);
  }

  /** The `length` bytes of text at `offset` (what a plan entry keeps of a slot, without an object for it). */
  read(offset: number, length: number): string {
    if (this.fd === undefined) throw new Error('restore spool read after it was closed');
    const buf = this.scratch(length);
    let done = 0;
    while (done < length) {
      const n = readSync(this.fd, buf, done, length - done, offset + done);
      if (!n) throw new Error(`restore spool truncated at ${offset + done}`);
      done += n;
    }
    return buf.toString('utf8', 0, length);
  }

  /**
   * A buffer of at least `bytes` for one put or read, the same one each time: a Buffer per text was 100k small
   * ArrayBuffers per pass of a 100k-object restore, memory outside the heap that V8 frees only when it collects.
   * A text over SCRATCH_MAX gets a buffer of its own.
   */
  private scratch(bytes: number): Buffer {
    if (bytes > SCRATCH_MAX) return Buffer.allocUnsafeSlow(bytes);
    if (!this.buf || this.buf.length < bytes) this.buf = Buffer.allocUnsafeSlow(Math.max(bytes, 64 * 1024));
    return this.buf;
  }

  /** Bytes spooled so far. */
  get size(): number {
    return this.end;
  }

  /** Removes the file; entries spooled before can no longer be read. Safe to call more than once. */
  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
    this.fd = undefined;
    this.dir = undefined;
  }

  private open(): number {
    if (this.fd !== undefined) return this.fd;
    // Created on first use (a restore of a few core objects never makes one), private to this user, and removed from
    // its folder at once where the system allows it (the open descriptor still reads and writes it): nothing is left
    // behind however the process ends. Where it does not (Windows), close removes it.
    this.dir = mkdtempSync(path.join(os.tmpdir(), 'cni-rewind-restore-'));
    this.fd = openSync(path.join(this.dir, 'plan.jsonl'), 'w+', 0o600);
    try {
      rmSync(this.dir, { recursive: true });
      this.dir = undefined;
    } catch {
      // kept until close
    }
    return this.fd;
  }
}
