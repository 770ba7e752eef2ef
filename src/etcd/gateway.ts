/**
 * A small client of etcd's v3 JSON gateway (`POST /v3/kv/range`, `/v3/kv/txn` on the client URL, served by every
 * etcd 3.4 and later), which is all cni-rewind needs of Calico's etcd datastore: read a prefix page by page at one
 * revision, and write a key only if it is absent or unchanged since it was read. No etcd client library: the gateway
 * is plain HTTPS with the client certificate calico-etcd.yaml gives calico-node, and keys and values are base64.
 *
 * Certificates and keys stay in memory; no message of this module carries them.
 */
import https from 'node:https';
import http from 'node:http';

export interface EtcdTls {
  /** PEM of the CA that signed the server's certificate (without it, the system's CAs). */
  ca?: Buffer;
  /** PEM client certificate and key, when etcd asks for one (`--client-cert-auth`). */
  cert?: Buffer;
  key?: Buffer;
}

export interface EtcdConnection {
  /** Client URLs, tried in order until one answers (`https://10.0.0.1:2379`). */
  endpoints: string[];
  tls: EtcdTls;
}

export interface EtcdKv {
  key: string;
  value: Buffer;
  /** Revisions as etcd reports them (decimal strings: int64 does not fit a JS number in general). */
  modRevision: string;
  createRevision: string;
}

export class EtcdError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

const b64 = (s: string | Buffer) => Buffer.from(s).toString('base64');

/** The key after every key that starts with `prefix` (etcd's range_end for a prefix). */
export function prefixEnd(prefix: string): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i]!++;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]); // every key
}

interface RawKv {
  key: string;
  value?: string;
  mod_revision?: string;
  create_revision?: string;
}

export class EtcdGateway {
  private preferred = 0;

  constructor(
    private readonly conn: EtcdConnection,
    private readonly timeoutMs = 15_000,
  ) {
    if (conn.endpoints.length === 0) throw new EtcdError('no etcd endpoint given');
  }

  /** POST one gateway call to the first endpoint that answers; an endpoint that refuses the connection is skipped. */
  private async call(route: string, body: unknown): Promise<any> {
    const errors: string[] = [];
    for (let n = 0; n < this.conn.endpoints.length; n++) {
      const i = (this.preferred + n) % this.conn.endpoints.length;
      const endpoint = this.conn.endpoints[i]!;
      try {
        const out = await this.post(endpoint, route, JSON.stringify(body));
        this.preferred = i;
        return out;
      } catch (err) {
        if (err instanceof EtcdError && err.status !== undefined) throw err; // etcd answered: another member says the same
        errors.push(`${endpoint}: ${(err as Error).message}`);
      }
    }
    throw new EtcdError(`no etcd endpoint answered (${errors.join('; ')})`);
  }

  private post(endpoint: string, route: string, body: string): Promise<any> {
    const url = new URL(route, endpoint.endsWith('/') ? endpoint : `${endpoint}/`);
    const secure = url.protocol === 'https:';
    const request = secure ? https.request : http.request;
    const { ca, cert, key } = this.conn.tls;
    return new Promise((resolve, reject) => {
      const req = request(
        url,
        {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
          timeout: this.timeoutMs,
          ...(secure ? { ca, cert, key } : {}),
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: any;
            try {
              parsed = JSON.parse(text);
            } catch {
              return reject(new EtcdError(`etcd answered ${route} with HTTP ${res.statusCode} and no JSON`, res.statusCode ?? 0));
            }
            if (res.statusCode !== 200 || parsed?.error) {
              return reject(new EtcdError(`etcd refused ${route}: ${parsed?.message ?? parsed?.error ?? `HTTP ${res.statusCode}`}`, res.statusCode ?? 0));
            }
            resolve(parsed);
          });
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`no answer in ${this.timeoutMs} ms`)));
      req.on('error', reject);
      req.end(body);
    });
  }

  /** The cluster's current revision (a range that returns no key). */
  async revision(): Promise<string> {
    const r = await this.call('v3/kv/range', { key: b64('\0'), count_only: true });
    return String(r.header?.revision ?? '0');
  }

  /**
   * Every key under `prefix`, in key order, `pageSize` at a time, all read at one revision (the first page's): a
   * consistent picture however long the read takes, as long as etcd has not compacted that revision away.
   */
  async *rangePrefix(prefix: string, pageSize = 500, revision?: string): AsyncGenerator<{ kvs: EtcdKv[]; revision: string }> {
    const end = b64(prefixEnd(prefix));
    let from: Buffer = Buffer.from(prefix);
    let rev = revision;
    for (;;) {
      const r = await this.call('v3/kv/range', { key: b64(from), range_end: end, limit: pageSize, ...(rev ? { revision: rev } : {}) });
      rev ??= String(r.header?.revision ?? '0');
      const raw: RawKv[] = r.kvs ?? [];
      const kvs = raw.map(toKv);
      yield { kvs, revision: rev };
      if (!r.more || raw.length === 0) return;
      // The next page starts just after the last key of this one.
      from = Buffer.concat([Buffer.from(raw[raw.length - 1]!.key, 'base64'), Buffer.from([0])]);
    }
  }

  async get(key: string): Promise<EtcdKv | undefined> {
    const r = await this.call('v3/kv/range', { key: b64(key) });
    const raw: RawKv | undefined = r.kvs?.[0];
    return raw ? toKv(raw) : undefined;
  }

  /** Write `key` only if it does not exist; false when it does (nothing written). */
  async createIfAbsent(key: string, value: Buffer | string): Promise<boolean> {
    return this.putIf(key, value, { target: 'CREATE', create_revision: '0' });
  }

  /** Write `key` only if it was last changed at `modRevision` (as read); false when it changed since (nothing written). */
  async replaceIfUnchanged(key: string, value: Buffer | string, modRevision: string): Promise<boolean> {
    return this.putIf(key, value, { target: 'MOD', mod_revision: modRevision });
  }

  private async putIf(key: string, value: Buffer | string, compare: Record<string, string>): Promise<boolean> {
    const k = b64(key);
    const r = await this.call('v3/kv/txn', {
      compare: [{ key: k, result: 'EQUAL', ...compare }],
      success: [{ request_put: { key: k, value: b64(value) } }],
    });
    return r.succeeded === true;
  }
}

function toKv(raw: RawKv): EtcdKv {
  return {
    key: Buffer.from(raw.key, 'base64').toString('utf8'),
    value: Buffer.from(raw.value ?? '', 'base64'),
    modRevision: String(raw.mod_revision ?? '0'),
    createRevision: String(raw.create_revision ?? '0'),
  };
}
