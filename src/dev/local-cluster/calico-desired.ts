import { createHash } from 'node:crypto';
import { imageTag } from '../../calico/knowledge.js';
import type { KubeObject } from '../../kube/types.js';

/**
 * What the Calico supervisor should be running, derived from the cluster objects a real cluster's kubelets
 * would act on. Pure functions, so the rules are unit-tested without processes.
 */

export interface DesiredOperator {
  tag: string;
  /** The container's args as released (3.30's manifest passes `-manage-crds=true`: that operator then keeps the CRDs). */
  args: string[];
}

/**
 * The operator Deployment's image tag while it wants a replica; undefined = stopped (scaled to 0 or absent, or its
 * namespace terminating: no pod can be created there, whatever the Deployment still says while it is being deleted).
 */
export function desiredOperator(deployment: KubeObject | undefined, namespace?: KubeObject): DesiredOperator | undefined {
  if (namespace?.metadata.deletionTimestamp) return undefined;
  const c = wantedContainer(deployment, 'tigera-operator');
  const tag = imageTag(c?.image);
  return tag ? { tag, args: (c?.args ?? []).map(String) } : undefined;
}

/**
 * The finalizer the supervisor keeps on live operator pods. kwok deletes a pod the moment it is asked to, while
 * the supervisor stops the process only on its next tick: without it, a caller that scales the operator to 0 and
 * waits for its pods to go (restore) would write under a still running operator. A kubelet holds the pod until
 * the container has exited; this finalizer does the same for the out-of-cluster process.
 */
export const OPERATOR_POD_FINALIZER = 'cni-rewind.io/local-operator-process';

export interface OperatorPodActions {
  /** Stop the running process: a pod of its tag is going and no live pod of that tag is left. */
  stop: boolean;
  /** Terminating pods to release once `stop` is done (their process is stopped, or a live pod of the tag keeps it). */
  release: KubeObject[];
  /** Live pods to hold with the finalizer. */
  hold: KubeObject[];
}

/** What to do about the operator's pods (namespace tigera-operator) given the tag of the process that runs. */
export function operatorPodActions(pods: KubeObject[], runningTag: string | undefined): OperatorPodActions {
  const held = (p: KubeObject) => (p.metadata.finalizers ?? []).includes(OPERATOR_POD_FINALIZER);
  const tagOf = (p: KubeObject) => imageTag(podContainer(p)?.image);
  const operatorPods = pods.filter((p) => podContainer(p));
  const live = operatorPods.filter((p) => !p.metadata.deletionTimestamp);
  const going = operatorPods.filter((p) => p.metadata.deletionTimestamp);
  const stop = runningTag !== undefined && going.some((p) => tagOf(p) === runningTag) && !live.some((p) => tagOf(p) === runningTag);
  return { stop, release: going.filter(held), hold: live.filter((p) => !held(p)) };
}

function podContainer(pod: KubeObject): any {
  const containers: any[] = pod.spec?.containers ?? [];
  return containers.find((c) => c.name === 'tigera-operator');
}

/** The named (else the first) container of a Deployment that wants a replica: not deleted, not scaled to 0. */
function wantedContainer(deployment: KubeObject | undefined, name: string): any {
  if (!deployment || deployment.metadata.deletionTimestamp || (deployment.spec?.replicas ?? 1) < 1) return undefined;
  const containers: any[] = deployment.spec?.template?.spec?.containers ?? [];
  return containers.find((x) => x.name === name) ?? containers[0];
}

export interface DesiredApiServer {
  /** The Service's ClusterIP: with loopback Service IPs, a process bound there is what the aggregator dials. */
  address: string;
  port: number;
  /** The rendered image's tag: the Calico version whose API server to run. */
  tag?: string;
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
  const container = wantedContainer(deployment, 'calico-apiserver');
  if (!container) return undefined;
  const address: string | undefined = service?.spec?.clusterIP;
  const port: number | undefined = service?.spec?.ports?.[0]?.port;
  if (!address || address === 'None' || !port) return undefined;
  const crt = secret?.data?.['tls.crt'];
  const key = secret?.data?.['tls.key'];
  if (!crt || !key) return undefined;
  const cert = Buffer.from(crt, 'base64').toString('utf8');
  const keyPem = Buffer.from(key, 'base64').toString('utf8');
  const fingerprint = createHash('sha256').update(`${address}:${port}\n${cert}\n${keyPem}`).digest('hex').slice(0, 16);
  return { address, port, tag: imageTag(container.image), cert, key: keyPem, fingerprint };
}

/**
 * calico-kube-controllers runs while either install's Deployment (operator: calico-system; manifest: kube-system)
 * wants a replica; its image tag says which Calico version's program to run.
 */
export function desiredKubeControllers(deployments: (KubeObject | undefined)[]): { tag?: string } | undefined {
  for (const d of deployments) {
    const c = wantedContainer(d, 'calico-kube-controllers');
    if (c) return { tag: imageTag(c.image) };
  }
  return undefined;
}

/** A /24 of loopback Service IPs per cluster instance, so two instances never hand out the same ClusterIP. */
export function serviceCidr(portBase: number): string {
  return `127.1.${portBase % 256}.0/24`;
}
