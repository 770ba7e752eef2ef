import v8 from 'node:v8';

let asked = false;

/**
 * Asks V8 to favour a small heap over speed (its `--optimize-for-size`), once per process, before a command's work.
 * A restore, an export or an apply streams up to millions of objects through short-lived garbage (parsed JSON, HTTP/2
 * stream objects) over a live set of a few tens of MB, and by default V8 lets the heap grow to a multiple of what is
 * live before it collects: peak RSS then grew with the objects restored although what is live hardly did
 * (bench/restore.ts --engine-only, one run side by side: 254 MiB at 100,000 handles and 164-170 MiB at 10,000 without
 * it, 158 and 134-135 MiB with it, and 100,000 took 152 s instead of 191 s: less memory to scan). Node keeps V8's
 * flags writable after start (its documentation's own example of v8.setFlagsFromString changes one at run time).
 */
export function preferSmallHeap(): void {
  if (asked) return;
  asked = true;
  v8.setFlagsFromString('--optimize-for-size');
}
