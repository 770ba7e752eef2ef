import path from 'node:path';
import { auditArgs } from './audit-policy.js';
import { serviceCidr } from './calico-desired.js';

/** The loopback ports of one local cluster's components (LocalCluster.ports). */
export interface ComponentPorts {
  apiserver: number;
  etcd: number;
  kcm: number;
  scheduler: number;
}

/** The flags each control-plane component starts with; the cluster's reuse digest covers all of them. */
export function apiserverArgs(p: ComponentPorts, pki: string): string[] {
  return [
    `--etcd-servers=http://127.0.0.1:${p.etcd}`,
    '--bind-address=127.0.0.1',
    '--advertise-address=127.0.0.1',
    `--secure-port=${p.apiserver}`,
    `--tls-cert-file=${pki}/apiserver.crt`,
    `--tls-private-key-file=${pki}/apiserver.key`,
    `--client-ca-file=${pki}/ca.crt`,
    '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
    `--service-account-key-file=${pki}/sa.pub`,
    `--service-account-signing-key-file=${pki}/sa.key`,
    // Loopback Service IPs: a host process bound to a Service's ClusterIP:port is that Service for the
    // aggregation layer (the Calico API server), with no kube-proxy and no traffic off loopback.
    `--service-cluster-ip-range=${serviceCidr(p.apiserver)}`,
    '--authorization-mode=Node,RBAC',
    '--allow-privileged=true',
    '--endpoint-reconciler-type=none',
    // The aggregation layer, for projectcalico.org/v3 served by the Calico API server.
    `--requestheader-client-ca-file=${pki}/front-proxy-ca.crt`,
    '--requestheader-allowed-names=front-proxy-client',
    '--requestheader-extra-headers-prefix=X-Remote-Extra-',
    '--requestheader-group-headers=X-Remote-Group',
    '--requestheader-username-headers=X-Remote-User',
    `--proxy-client-cert-file=${pki}/front-proxy-client.crt`,
    `--proxy-client-key-file=${pki}/front-proxy-client.key`,
    // Generous limits: benchmarks push 100k objects through one client.
    '--max-requests-inflight=800',
    '--max-mutating-requests-inflight=400',
    ...auditArgs(path.dirname(pki)),
  ];
}

export function controllerManagerArgs(p: ComponentPorts, pki: string, kubeconfig: string): string[] {
  return [
    `--kubeconfig=${kubeconfig}`,
    '--bind-address=127.0.0.1',
    `--secure-port=${p.kcm}`,
    '--leader-elect=false',
    `--root-ca-file=${pki}/ca.crt`,
    `--service-account-private-key-file=${pki}/sa.key`,
    '--use-service-account-credentials=false',
    '--node-monitor-period=5s',
    '--node-monitor-grace-period=40s',
    '--concurrent-gc-syncs=10',
    '--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics',
  ];
}

export function schedulerArgs(p: ComponentPorts, kubeconfig: string): string[] {
  return [
    `--kubeconfig=${kubeconfig}`,
    '--bind-address=127.0.0.1',
    `--secure-port=${p.scheduler}`,
    '--leader-elect=false',
    '--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics',
  ];
}

/** A one-member etcd on 127.0.0.1: its name, data directory and URLs (the cluster's own over http, Calico's over https). */
export function singleMemberEtcdArgs(name: string, dataDir: string, scheme: 'http' | 'https', client: number, peer: number): string[] {
  return [
    `--name=${name}`,
    `--data-dir=${dataDir}`,
    `--listen-client-urls=${scheme}://127.0.0.1:${client}`,
    `--advertise-client-urls=${scheme}://127.0.0.1:${client}`,
    `--listen-peer-urls=${scheme}://127.0.0.1:${peer}`,
    `--initial-advertise-peer-urls=${scheme}://127.0.0.1:${peer}`,
    `--initial-cluster=${name}=${scheme}://127.0.0.1:${peer}`,
  ];
}

/**
 * The environment of the local cluster's control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
 * kwok) and Calico's etcd: garbage collected less often than Go's default GOGC=100. The test machine runs four
 * clusters on 2 cores with the CPU saturated (the kube-apiservers about 110% of it) and most of its 24 GiB free; side
 * by side under the same write load kube-apiserver used 0.81-0.83 times the CPU, for about twice the peak memory
 * (bench/go-gc.ts). GOMEMLIMIT keeps the growth bounded (the GC works harder near it, never fails). What the caller
 * set wins. Calico's programs (started by the supervisor) keep Go's defaults: nothing measured them.
 */
export function goProgramEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return { ...env, GOGC: env.GOGC ?? '400', GOMEMLIMIT: env.GOMEMLIMIT ?? '3GiB' };
}
