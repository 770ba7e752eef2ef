import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveUnixToTcp } from './api-bridge.js';
import { deleteNetns, ensureNetns, netnsPrefix } from './netns.js';
import { NodeBridge } from './node-side-bridge.js';

// A real node namespace (`ip netns`, as root) and the built bridge (dist/, `npm run build`), as the node side runs
// them; on this machine's 127.0.0.1 a TCP server answering "pong" stands where the API server's port is.
const cluster = `ut${randomBytes(3).toString('hex')}`;
const ns = `${netnsPrefix(cluster)}n-${randomBytes(6).toString('hex')}`;
const dir = mkdtempSync(path.join(os.tmpdir(), 'cnr-bridge-'));
const lines: string[] = [];
let server: net.Server;
let unix: net.Server;
let port: number;
let bridge: NodeBridge;

/** What a client inside the namespace gets from 127.0.0.1:port, as the CNI plugin dials it: "pong" or the error code. */
function dialInside(): Promise<string> {
  const code = `const s=require('net').connect(${port},'127.0.0.1',()=>s.write('ping'));s.on('data',d=>{process.stdout.write(String(d));s.destroy()});s.on('error',e=>process.stdout.write(e.code))`;
  return new Promise((resolve) => {
    const child = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', code], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.on('data', (b) => (out += b));
    child.on('exit', () => resolve(out));
  });
}

/** Until the bridge's process is seen gone (its exit handled), at most 10 s. */
async function gone(): Promise<void> {
  for (let i = 0; i < 500 && bridge.pid !== undefined; i++) await new Promise((r) => setTimeout(r, 20));
  expect(bridge.pid).toBeUndefined();
}

beforeAll(async () => {
  server = net.createServer((c) => c.on('data', () => c.end('pong')));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as net.AddressInfo).port;
  unix = serveUnixToTcp(path.join(dir, 'api.sock'), port);
  ensureNetns(ns);
  bridge = new NodeBridge('api-bridge-test', ns, port, path.join(dir, 'api.sock'), dir, (l) => lines.push(l));
});

afterAll(async () => {
  await bridge?.stop();
  deleteNetns(ns);
  unix?.close();
  server?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('the API bridge into a node namespace', () => {
  it('serves from the first call after it is started', async () => {
    expect(await bridge.ready()).toBe(true);
    expect(await dialInside()).toBe('pong');
  });

  it('is started again at once when its process died', async () => {
    const pid = bridge.pid!;
    process.kill(pid, 'SIGKILL');
    await gone();
    expect(await bridge.ready()).toBe(true);
    expect(await dialInside()).toBe('pong');
    expect(bridge.pid).not.toBe(pid);
  });

  it('is started again when a call meets "connection refused": here its namespace was removed and made again under it', async () => {
    // What another cluster's stopCalico did (netns.test.ts): the process lives on in the namespace that lost its name.
    const pid = bridge.pid!;
    deleteNetns(ns);
    ensureNetns(ns);
    expect(await dialInside()).toBe('ECONNREFUSED');
    expect(await bridge.recover()).toBe(true);
    expect(await dialInside()).toBe('pong');
    expect(bridge.pid).not.toBe(pid);
    expect(lines.join('\n')).toMatch(/not serving/);
  });
});
