/**
 * A recording HTTP proxy in front of moto's EC2 endpoint: every EC2 query-protocol call is forwarded unchanged and
 * recorded (action, form parameters, time), and an optional hook sees each call first. Tests use it to know
 * exactly which calls cni-rewind made (e.g. RebootInstances, in which order) and to react to them the way the
 * real world would (a rebooted machine's kubelet reporting a new boot id), without changing what moto answers.
 */
import http from 'node:http';
import { forward } from './moto.js';

export interface Ec2Call {
  action: string;
  params: Record<string, string>;
  time: number;
}

export interface RecordingEc2Proxy {
  url: string;
  calls: Ec2Call[];
  /** Calls of one action, in order. */
  actions(action: string): Ec2Call[];
  close(): Promise<void>;
}

export async function startRecordingEc2Proxy(target: string, onCall?: (call: Ec2Call) => void): Promise<RecordingEc2Proxy> {
  const calls: Ec2Call[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks);
      const form = new URLSearchParams(body.toString('utf8'));
      const call: Ec2Call = { action: form.get('Action') ?? '', params: Object.fromEntries(form.entries()), time: Date.now() };
      calls.push(call);
      try {
        onCall?.(call);
      } catch {
        /* a hook's failure is the test's business, not the proxy's */
      }
      await forward(target, req, res, body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    actions: (action) => calls.filter((c) => c.action === action),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
