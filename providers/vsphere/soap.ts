/**
 * A minimal vSphere Web Services (SOAP/VIM) client: plain HTTP POSTs of SOAP envelopes to <url>/sdk, the login
 * cookie `vmware_soap_session`, and the handful of methods snapshots need (RetrieveServiceContent, Login,
 * FindByInventoryPath, CreateSnapshot_Task, RevertToSnapshot_Task, RemoveSnapshot_Task, PowerOnVM_Task,
 * RetrievePropertiesEx for task state and VM properties, CreateContainerView for listing).
 */
import { defaultRetryPolicy, EnvironmentError, HttpClient, isTransient, type RetryPolicy, type TlsOptions, withRetry } from '../../src/provider-kit/index.js';
import { child, childrenNamed, escapeXml, find, parseXml, textOf, type XmlNode } from './xml.js';

export interface MoRef {
  type: string;
  value: string;
}

/** A SOAP argument: a string/number/boolean, a managed object reference, raw XML, or a list of them. */
export type SoapValue = string | number | boolean | MoRef | { raw: string } | SoapValue[];

export class SoapFault extends EnvironmentError {
  constructor(
    method: string,
    readonly faultString: string,
    /** The fault type from the detail, e.g. `ManagedObjectNotFoundFault`, `InvalidLoginFault`. */
    readonly faultType: string | undefined,
  ) {
    super(`vSphere ${method} failed: ${faultString}${faultType ? ` (${faultType})` : ''}`);
  }
}

function encodeArg(name: string, v: SoapValue): string {
  if (Array.isArray(v)) return v.map((x) => encodeArg(name, x)).join('');
  if (typeof v === 'object' && 'raw' in v) return `<${name}>${v.raw}</${name}>`;
  if (typeof v === 'object') return `<${name} type="${escapeXml(v.type)}">${escapeXml(v.value)}</${name}>`;
  return `<${name}>${escapeXml(String(v))}</${name}>`;
}

/** Methods that change nothing: safe to send again after a connection reset or a 5xx. */
const READ_ONLY = /^(Retrieve|ContinueRetrieve|Find|CreateContainerView$|DestroyView$|CurrentTime$)/;
const SESSION_METHODS = new Set(['Login', 'Logout', 'RetrieveServiceContent', 'TerminateSession']);

function isNotAuthenticated(err: unknown): boolean {
  return err instanceof SoapFault && /NotAuthenticated|session is not authenticated/i.test(`${err.faultType} ${err.faultString}`);
}

export const moref = (n: XmlNode | undefined): MoRef | undefined => (n ? { type: n.attrs.type ?? '', value: n.text.trim() } : undefined);

export interface ServiceContent {
  rootFolder: MoRef;
  propertyCollector: MoRef;
  viewManager: MoRef;
  sessionManager: MoRef;
  searchIndex: MoRef;
  about: { fullName?: string; apiVersion?: string };
}

export class VimClient {
  private readonly http: HttpClient;
  private cookie?: string;
  private sc?: ServiceContent;
  private credentials?: { userName: string; password: string };
  private relogin?: Promise<void>;
  /** Told when an expired session is logged in again (for a debug message and tests). */
  onRelogin?: () => void;

  constructor(
    readonly url: URL,
    tls: TlsOptions,
    private readonly retry: RetryPolicy = { ...defaultRetryPolicy, maxElapsedMs: 60_000 },
  ) {
    this.http = new HttpClient('vSphere', url, tls);
  }

  /**
   * One SOAP call. Transient failures (connection refused/reset, HTTP 502/503/504) are retried with backoff,
   * within a bounded budget, for read-only methods and for requests that never reached the server; an expired
   * session (NotAuthenticated) is logged in again once and the call repeated.
   */
  async call(method: string, args: [string, SoapValue | undefined][]): Promise<XmlNode> {
    const once = () =>
      withRetry(
        () => this.callOnce(method, args),
        (err) => ({ retry: isTransient(err, READ_ONLY.test(method)) }),
        this.retry,
      );
    const cookieUsed = this.cookie;
    try {
      return await once();
    } catch (err) {
      const credentials = this.credentials;
      if (!credentials || SESSION_METHODS.has(method) || !isNotAuthenticated(err)) throw err;
      // Calls running in parallel all see the session die: the first logs in again, the others wait for that
      // login (or, when it is already done, see a new cookie) instead of each opening a session of its own.
      if (this.cookie === cookieUsed) {
        this.relogin ??= (async () => {
          this.cookie = undefined;
          this.onRelogin?.();
          await this.login(credentials.userName, credentials.password);
        })().finally(() => (this.relogin = undefined));
      }
      await this.relogin;
      return once();
    }
  }

  private async callOnce(method: string, args: [string, SoapValue | undefined][]): Promise<XmlNode> {
    const body = args
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => encodeArg(k, v!))
      .join('');
    const envelope =
      '<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" ' +
      'xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">' +
      `<soapenv:Body><${method} xmlns="urn:vim25">${body}</${method}></soapenv:Body></soapenv:Envelope>`;
    const res = await this.http.request('POST', this.url.pathname, {
      headers: { 'content-type': 'text/xml; charset=utf-8', soapaction: 'urn:vim25/6.5', ...(this.cookie ? { cookie: this.cookie } : {}) },
      body: envelope,
    });
    const setCookie = res.headers['set-cookie']?.find((c) => c.startsWith('vmware_soap_session='));
    if (setCookie) this.cookie = setCookie.split(';')[0];
    const doc = parseXml(res.body);
    const fault = find(doc, 'Fault');
    if (fault) {
      const detail = child(fault, 'detail');
      const type = detail?.children[0]?.attrs.type ?? detail?.children[0]?.name;
      throw new SoapFault(method, textOf(fault, 'faultstring') ?? 'unknown fault', type);
    }
    if (res.status >= 400) throw Object.assign(new EnvironmentError(`vSphere ${method}: HTTP ${res.status} from ${this.url.host}`), { status: res.status });
    const resp = find(doc, `${method}Response`);
    if (!resp) throw new EnvironmentError(`vSphere ${method}: unexpected answer from ${this.url.host} (not a SOAP response)`);
    return resp;
  }

  async serviceContent(): Promise<ServiceContent> {
    if (this.sc) return this.sc;
    const r = child(await this.call('RetrieveServiceContent', [['_this', { type: 'ServiceInstance', value: 'ServiceInstance' }]]), 'returnval');
    const ref = (name: string) => {
      const m = moref(child(r, name));
      if (!m) throw new EnvironmentError(`vSphere: the service content from ${this.url.host} has no ${name}`);
      return m;
    };
    const about = child(r, 'about');
    this.sc = {
      rootFolder: ref('rootFolder'),
      propertyCollector: ref('propertyCollector'),
      viewManager: ref('viewManager'),
      sessionManager: ref('sessionManager'),
      searchIndex: ref('searchIndex'),
      about: { fullName: textOf(about, 'fullName'), apiVersion: textOf(about, 'apiVersion') },
    };
    return this.sc;
  }

  async login(userName: string, password: string): Promise<void> {
    const sc = await this.serviceContent();
    await this.call('Login', [
      ['_this', sc.sessionManager],
      ['userName', userName],
      ['password', password],
    ]);
    this.credentials = { userName, password };
  }

  async logout(): Promise<void> {
    this.credentials = undefined;
    if (!this.cookie || !this.sc) return;
    await this.call('Logout', [['_this', this.sc.sessionManager]]).catch(() => undefined);
    this.cookie = undefined;
  }

  async findByInventoryPath(path: string): Promise<MoRef | undefined> {
    const sc = await this.serviceContent();
    return moref(
      child(
        await this.call('FindByInventoryPath', [
          ['_this', sc.searchIndex],
          ['inventoryPath', path],
        ]),
        'returnval',
      ),
    );
  }

  /** A VM by its BIOS UUID (config.uuid, what `vsphere://` providerIDs carry), in any datacenter and folder. */
  async findVmByUuid(uuid: string): Promise<MoRef | undefined> {
    const sc = await this.serviceContent();
    return moref(
      child(
        await this.call('FindByUuid', [
          ['_this', sc.searchIndex],
          ['uuid', uuid],
          ['vmSearch', true],
          ['instanceUuid', false],
        ]),
        'returnval',
      ),
    );
  }

  /** Properties of objects: [{obj, props: {name -> value node}}]. With `viaView`, objects = a container view's `view`. */
  async retrieve(type: string, paths: string[], objs: MoRef[], viaView = false): Promise<{ obj: MoRef; props: Map<string, XmlNode> }[]> {
    const sc = await this.serviceContent();
    const objectSet = objs
      .map((o) =>
        viaView
          ? `<objectSet><obj type="${o.type}">${escapeXml(o.value)}</obj><skip>true</skip><selectSet xsi:type="TraversalSpec"><name>view</name><type>ContainerView</type><path>view</path><skip>false</skip></selectSet></objectSet>`
          : `<objectSet><obj type="${o.type}">${escapeXml(o.value)}</obj><skip>false</skip></objectSet>`,
      )
      .join('');
    const spec = `<propSet><type>${type}</type>${paths.map((p) => `<pathSet>${p}</pathSet>`).join('')}</propSet>${objectSet}`;
    const out: { obj: MoRef; props: Map<string, XmlNode> }[] = [];
    let resp = child(
      await this.call('RetrievePropertiesEx', [
        ['_this', sc.propertyCollector],
        ['specSet', { raw: spec }],
        ['options', { raw: '' }],
      ]),
      'returnval',
    );
    for (;;) {
      for (const o of childrenNamed(resp, 'objects')) {
        const props = new Map<string, XmlNode>();
        for (const p of childrenNamed(o, 'propSet')) props.set(textOf(p, 'name') ?? '', child(p, 'val')!);
        out.push({ obj: moref(child(o, 'obj'))!, props });
      }
      const token = textOf(resp, 'token');
      if (!token) break;
      resp = child(
        await this.call('ContinueRetrievePropertiesEx', [
          ['_this', sc.propertyCollector],
          ['token', token],
        ]),
        'returnval',
      );
    }
    return out;
  }

  async allVirtualMachines(paths: string[]): Promise<{ obj: MoRef; props: Map<string, XmlNode> }[]> {
    const sc = await this.serviceContent();
    const view = moref(
      child(
        await this.call('CreateContainerView', [
          ['_this', sc.viewManager],
          ['container', sc.rootFolder],
          ['type', 'VirtualMachine'],
          ['recursive', true],
        ]),
        'returnval',
      ),
    )!;
    try {
      return await this.retrieve('VirtualMachine', paths, [view], true);
    } finally {
      await this.call('DestroyView', [['_this', view]]).catch(() => undefined);
    }
  }

  /** Start a `*_Task` method; returns the Task reference. */
  async startTask(method: string, args: [string, SoapValue | undefined][]): Promise<MoRef> {
    const t = moref(child(await this.call(method, args), 'returnval'));
    if (!t) throw new EnvironmentError(`vSphere ${method}: no task returned`);
    return t;
  }

  /** Poll Task.info until success or error. Returns info.result (e.g. the new snapshot's reference). */
  async waitTask(task: MoRef, what: string, opts: { timeoutMs: number; intervalMs?: number; onProgress?: (p: string) => void }): Promise<XmlNode | undefined> {
    const deadline = Date.now() + opts.timeoutMs;
    let interval = opts.intervalMs ?? 250;
    for (;;) {
      const [o] = await this.retrieve('Task', ['info'], [task]);
      const info = o?.props.get('info');
      const state = textOf(info, 'state');
      if (state === 'success') return child(info, 'result');
      if (state === 'error') {
        const err = child(info, 'error');
        throw new EnvironmentError(
          `vSphere task ${task.value} (${what}) failed: ${textOf(err, 'localizedMessage') ?? child(err, 'fault')?.attrs.type ?? 'unknown error'}`,
        );
      }
      const progress = textOf(info, 'progress');
      opts.onProgress?.(`${state ?? 'unknown'}${progress ? ` ${progress}%` : ''}`);
      if (Date.now() > deadline)
        throw new EnvironmentError(`vSphere task ${task.value} (${what}) did not finish within ${Math.round(opts.timeoutMs / 1000)} s (state ${state})`);
      await new Promise((r) => setTimeout(r, interval));
      interval = Math.min(interval * 2, 5_000);
    }
  }

  close(): void {
    this.http.close();
  }
}
