/**
 * The local cluster's audit log (src/dev/local-cluster/audit-policy.ts) read back for a failed test: every recorded
 * write to the named objects, oldest first, as "time verb resource/name -> code by user agent".
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { AUDIT_LOG } from '../../src/dev/local-cluster/audit-policy.js';

interface AuditEvent {
  requestReceivedTimestamp: string;
  verb: string;
  userAgent?: string;
  objectRef?: { resource?: string; name?: string };
  responseStatus?: { code?: number };
}

export function auditTrail(runDir: string, names: string[], limit = 40): string[] {
  const file = path.join(runDir, AUDIT_LOG);
  if (!existsSync(file)) return [`no audit log at ${file}`];
  const wanted = new Set(names.map((n) => n.toLowerCase()));
  const hits: string[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line || ![...wanted].some((n) => line.includes(n))) continue;
    const e = JSON.parse(line) as AuditEvent;
    if (!wanted.has(e.objectRef?.name ?? '')) continue;
    const agent = (e.userAgent ?? '?').split(' ')[0];
    hits.push(`${e.requestReceivedTimestamp} ${e.verb} ${e.objectRef?.resource}/${e.objectRef?.name} -> ${e.responseStatus?.code ?? '?'} by ${agent}`);
  }
  return hits.length > limit ? [`(${hits.length - limit} earlier writes left out)`, ...hits.slice(-limit)] : hits;
}

/** The KDD name of the IPAMBlock that holds `cidr` ("192.168.217.192/26" -> "192-168-217-192-26"). */
export const blockName = (cidr: string) => cidr.replace(/[./]/g, '-');
