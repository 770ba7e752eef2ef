/**
 * Just enough IP arithmetic for IPAM checks: parse v4/v6 addresses and CIDRs into bigints, test membership,
 * and turn a block CIDR + ordinal into an address. No dependency: `node:net` validates, bigint does the maths.
 */
import { isIP } from 'node:net';

export interface Cidr {
  family: 4 | 6;
  /** Network address as a number. */
  base: bigint;
  prefix: number;
  text: string;
}

export function parseIp(text: string): { family: 4 | 6; value: bigint } | undefined {
  const family = isIP(text);
  if (family === 4) {
    return { family, value: text.split('.').reduce((acc, o) => (acc << 8n) | BigInt(Number(o)), 0n) };
  }
  if (family === 6) {
    let t = text;
    const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(t);
    if (v4) {
      const n = parseIp(v4[1]!)!.value;
      t = t.slice(0, -v4[1]!.length) + `${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
    }
    const [head, tail] = t.split('::') as [string, string | undefined];
    const h = head ? head.split(':') : [];
    const tl = tail !== undefined && tail ? tail.split(':') : [];
    const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - tl.length).fill('0'), ...tl];
    return { family, value: groups.reduce((acc, g) => (acc << 16n) | BigInt(Number.parseInt(g, 16)), 0n) };
  }
  return undefined;
}

export function parseCidr(text: string | undefined): Cidr | undefined {
  if (!text) return undefined;
  const [addr, len] = text.split('/');
  const ip = parseIp(addr ?? '');
  if (!ip) return undefined;
  const bits = ip.family === 4 ? 32 : 128;
  const prefix = len === undefined ? bits : Number(len);
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > bits) return undefined;
  const hostBits = BigInt(bits - prefix);
  return { family: ip.family, base: (ip.value >> hostBits) << hostBits, prefix, text };
}

export function cidrContains(c: Cidr, ip: { family: 4 | 6; value: bigint }): boolean {
  if (c.family !== ip.family) return false;
  const hostBits = BigInt((c.family === 4 ? 32 : 128) - c.prefix);
  return ip.value >> hostBits === c.base >> hostBits;
}

export function formatIp(family: 4 | 6, value: bigint): string {
  if (family === 4) return [24n, 16n, 8n, 0n].map((s) => String((value >> s) & 0xffn)).join('.');
  const groups = [];
  for (let s = 112n; s >= 0n; s -= 16n) groups.push(((value >> s) & 0xffffn).toString(16));
  // Compress the longest run of zero groups, as the canonical form does.
  let best = { at: -1, len: 0 };
  for (let i = 0; i < 8;) {
    if (groups[i] !== '0') {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === '0') j++;
    if (j - i > best.len && j - i > 1) best = { at: i, len: j - i };
    i = j;
  }
  if (best.at < 0) return groups.join(':');
  return `${groups.slice(0, best.at).join(':')}::${groups.slice(best.at + best.len).join(':')}`;
}

/** The address at `ordinal` inside a block (IPAMBlock.spec.allocations is indexed by ordinal). */
export function addressAt(block: Cidr, ordinal: number): string {
  return formatIp(block.family, block.base + BigInt(ordinal));
}

/** Canonical text of an address (so `fd00::0001` and `fd00::1` compare equal). */
export function canonicalIp(text: string): string | undefined {
  const ip = parseIp(text);
  return ip ? formatIp(ip.family, ip.value) : undefined;
}
