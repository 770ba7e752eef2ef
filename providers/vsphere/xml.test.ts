import { describe, expect, it } from 'vitest';
import { parseConfig } from './index.js';
import { child, find, parseXml, textOf } from './xml.js';

describe('vSphere SOAP XML', () => {
  it('parses a fault and a typed property value, dropping namespace prefixes', () => {
    const doc = parseXml(`<?xml version="1.0"?><soapenv:Envelope xmlns:soapenv="x"><soapenv:Body><soapenv:Fault><faultcode>ServerFaultCode</faultcode>
      <faultstring>Login failure &amp; more</faultstring><detail><InvalidLoginFault xmlns="urn:vim25" xsi:type="InvalidLogin"/></detail></soapenv:Fault></soapenv:Body></soapenv:Envelope>`);
    const fault = find(doc, 'Fault');
    expect(textOf(fault, 'faultstring')).toBe('Login failure & more');
    expect(child(fault, 'detail')!.children[0]!.attrs.type).toBe('InvalidLogin');
  });
});

describe('vSphere config', () => {
  it('takes govc variables, moves credentials out of the URL and adds /sdk', () => {
    const c = parseConfig({}, { GOVC_URL: 'https://alice:s3cret-pw@vc.example.com', GOVC_INSECURE: '1' });
    expect(c.url.toString()).toBe('https://vc.example.com/sdk');
    expect(c).toMatchObject({ username: 'alice', password: 's3cret-pw', insecure: true, memory: false, quiesce: false });
  });
  it('refuses to start without credentials', () => {
    expect(() => parseConfig({ url: 'vc.example.com' }, {})).toThrow('vsphere: no credentials');
  });
});
