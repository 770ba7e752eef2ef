// The wrapper module of the IPAM driver (main.go). github.com/projectcalico/calico is not served by the module
// proxy at its release tags, so build-calico.sh extracts the pinned v3.28.1 tree into ./calico of its temp copy
// of this folder; the replace lines below point there. The k8s.io lines are the 3.28.1 tree's own replace block
// (replace directives of a dependency are ignored, so a module that imports it must repeat them).
module cni-rewind.local/ipam-driver

go 1.22

require (
	github.com/projectcalico/api v0.0.0-00010101000000-000000000000
	github.com/projectcalico/calico v0.0.0-00010101000000-000000000000
	github.com/sirupsen/logrus v1.9.3
)

replace (
	github.com/projectcalico/api => ./calico/api
	github.com/projectcalico/calico => ./calico

	k8s.io/api => k8s.io/api v0.28.12
	k8s.io/apiextensions-apiserver => k8s.io/apiextensions-apiserver v0.28.12
	k8s.io/apimachinery => k8s.io/apimachinery v0.28.12
	k8s.io/apiserver => k8s.io/apiserver v0.28.12
	k8s.io/cli-runtime => k8s.io/cli-runtime v0.28.12
	k8s.io/client-go => k8s.io/client-go v0.28.12
	k8s.io/cloud-provider => k8s.io/cloud-provider v0.28.12
	k8s.io/cluster-bootstrap => k8s.io/cluster-bootstrap v0.28.12
	k8s.io/code-generator => k8s.io/code-generator v0.28.12
	k8s.io/component-base => k8s.io/component-base v0.28.12
	k8s.io/component-helpers => k8s.io/component-helpers v0.28.12
	k8s.io/controller-manager => k8s.io/controller-manager v0.28.12
	k8s.io/cri-api => k8s.io/cri-api v0.28.12
	k8s.io/csi-translation-lib => k8s.io/csi-translation-lib v0.28.12
	k8s.io/endpointslice => k8s.io/endpointslice v0.28.12
	k8s.io/kube-aggregator => k8s.io/kube-aggregator v0.28.12
	k8s.io/kube-controller-manager => k8s.io/kube-controller-manager v0.28.12
	k8s.io/kube-proxy => k8s.io/kube-proxy v0.28.12
	k8s.io/kube-scheduler => k8s.io/kube-scheduler v0.28.12
	k8s.io/kubectl => k8s.io/kubectl v0.28.12
	k8s.io/kubelet => k8s.io/kubelet v0.28.12
	k8s.io/kubernetes => k8s.io/kubernetes v1.28.12
	k8s.io/legacy-cloud-providers => k8s.io/legacy-cloud-providers v0.28.12
	k8s.io/metrics => k8s.io/metrics v0.28.12
	k8s.io/mount-utils => k8s.io/mount-utils v0.28.12
	k8s.io/pod-security-admission => k8s.io/pod-security-admission v0.28.12
	k8s.io/sample-apiserver => k8s.io/sample-apiserver v0.28.12
)
