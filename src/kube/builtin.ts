import type { ResourceType } from './types.js';

/** Built-in resource types cni-rewind uses directly (no discovery needed for these). */
const t = (group: string, version: string, plural: string, kind: string, namespaced: boolean): ResourceType => ({ group, version, plural, kind, namespaced });

export const K = {
  namespace: t('', 'v1', 'namespaces', 'Namespace', false),
  node: t('', 'v1', 'nodes', 'Node', false),
  pod: t('', 'v1', 'pods', 'Pod', true),
  configMap: t('', 'v1', 'configmaps', 'ConfigMap', true),
  secret: t('', 'v1', 'secrets', 'Secret', true),
  serviceAccount: t('', 'v1', 'serviceaccounts', 'ServiceAccount', true),
  service: t('', 'v1', 'services', 'Service', true),
  deployment: t('apps', 'v1', 'deployments', 'Deployment', true),
  daemonSet: t('apps', 'v1', 'daemonsets', 'DaemonSet', true),
  replicaSet: t('apps', 'v1', 'replicasets', 'ReplicaSet', true),
  pdb: t('policy', 'v1', 'poddisruptionbudgets', 'PodDisruptionBudget', true),
  lease: t('coordination.k8s.io', 'v1', 'leases', 'Lease', true),
  crd: t('apiextensions.k8s.io', 'v1', 'customresourcedefinitions', 'CustomResourceDefinition', false),
  clusterRole: t('rbac.authorization.k8s.io', 'v1', 'clusterroles', 'ClusterRole', false),
  clusterRoleBinding: t('rbac.authorization.k8s.io', 'v1', 'clusterrolebindings', 'ClusterRoleBinding', false),
  role: t('rbac.authorization.k8s.io', 'v1', 'roles', 'Role', true),
  roleBinding: t('rbac.authorization.k8s.io', 'v1', 'rolebindings', 'RoleBinding', true),
  apiService: t('apiregistration.k8s.io', 'v1', 'apiservices', 'APIService', false),
} as const;
