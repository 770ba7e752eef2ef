import { createHash } from 'node:crypto';
import { imageTag } from '../../calico/knowledge.js';
import type { KubeObject } from '../../kube/types.js';

/**
 * What the Calico supervisor should be running, derived from the cluster objects a real cluster's kubelets
 * would act on. Pure functions, so the rules are unit-tested without processes.
 */

export interface DesiredOperator {
  tag: string;
}

/** The operator Deployment's image tag while it wants a replica; undefined = stopped (scaled to 0 or absent). */
export function desiredOperator(deployment: KubeObject | undefined): DesiredOperator | undefined {
  if (!deployment || deployment.metadata.deletionTimestamp) return undefined;
  if ((deployment.spec?.replicas ?? 1) < 1) return undefined;
  const containers: any[] = deployment.spec?.template?.spec?.containers ?? [];
  const c = containers.find((x) => x.name === 'tigera-operator') ?? containers[0];
  const tag = imageTag(c?.image);
  return tag ? { tag } : undefined;
}

export interface DesiredApiServer {
  /** The Service's ClusterIP: with loopback Service IPs, a process bound there is what the aggregator dials. */
  address: string;
  port: number;
  cert: string;
  key: string;
  /** Changes whenever the address, port or certificate changes (restart then). */
  fingerprint: string;
}

/**
 * The Calico API server as the operator rendered it: Deployment calico-apiserver (replicas > 0), Service
 * calico-api, secret calico-apiserver-certs. Undefined while any of them is missing.
 */
export function desiredApiServer(
  deployment: KubeObject | undefined,
  service: KubeObject | undefined,
  secret: KubeObject | undefined,
): DesiredApiServer | undefined {
  if (!deployment || deployment.metadata.deletionTimestamp || (deployment.spec?.replicas ?? 1) < 1) return undefined;
  const address: string | undefined = service?.spec?.clusterIP;
  const port: number | undefined = service?.spec?.ports?.[0]?.port;
  if (!address || address === 'None' || !port) return undefined;
  const crt = secret?.data?.['tls.crt'];
  const key = secret?.data?.['tls.key'];
  if (!crt || !key) return undefined;
  const cert = Buffer.from(crt, 'base64').toString('utf8');
  const keyPem = Buffer.from(key, 'base64').toString('utf8');
  const fingerprint = createHash('sha256').update(`${address}:${port}\n${cert}\n${keyPem}`).digest('hex').slice(0, 16);
  return { address, port, cert, key: keyPem, fingerprint };
}

/** calico-kube-controllers runs while either install's Deployment (operator: calico-system; manifest: kube-system) wants a replica. */
export function desiredKubeControllers(deployments: (KubeObject | undefined)[]): boolean {
  return deployments.some((d) => !!d && !d.metadata.deletionTimestamp && (d.spec?.replicas ?? 1) > 0);
}

/** A /24 of loopback Service IPs per cluster instance, so two instances never hand out the same ClusterIP. */
export function serviceCidr(portBase: number): string {
  return `127.1.${portBase % 256}.0/24`;
}
