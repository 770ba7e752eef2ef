/**
 * A recording HTTP proxy in front of moto's EC2 endpoint: every EC2 query-protocol call is forwarded unchanged and
 * recorded (action, form parameters, time), and an optional hook sees each call first. Tests use it to know
 * exactly which calls cni-rewind made (e.g. RebootInstances, in which order) and to react to them the way the
 * real world would (a rebooted machine's kubelet reporting a new boot id), without changing what moto answers.
 */
import { ec2Server, forward } from './moto.js';

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

/**
 * The hook sees each call before it is forwarded. When it returns a promise, the call is forwarded (and so answered)
 * only once that promise settles: a test uses this to hold a call "in flight" at an exact point (e.g. kill the client
 * after EC2 received a RebootInstances but before the client heard back), instead of racing a timer against it.
 */
export type Ec2CallHook = (call: Ec2Call) => void | Promise<unknown>;

export async function startRecordingEc2Proxy(target: string, onCall?: Ec2CallHook): Promise<RecordingEc2Proxy> {
  const calls: Ec2Call[] = [];
  const server = await ec2Server(async (req, res, body, form) => {
    const call: Ec2Call = { action: form.get('Action') ?? '', params: Object.fromEntries(form.entries()), time: Date.now() };
    calls.push(call);
    try {
      await onCall?.(call);
    } catch {
      /* a hook's failure is the test's business, not the proxy's */
    }
    await forward(target, req, res, body);
  });
  return {
    url: server.url,
    calls,
    actions: (action) => calls.filter((c) => c.action === action),
    close: server.close,
  };
}
