// calico-node-lite runs two of calico-node's own routines, compiled from the release tree without the rest of
// calico-node (Felix, BIRD, confd and the BPF tooling are the heavy part of that binary, and none of them runs in
// the local test cluster): `-startup` is calico-node's start-up (node/pkg/lifecycle/startup: the Node resource,
// the default pools, ClusterInformation) and `-allocate-tunnel-addrs` its long-running tunnel-address allocator
// (node/pkg/allocateip). Both read the environment exactly as calico-node does (NODENAME, CALICO_IPV4POOL_*,
// NO_DEFAULT_POOLS, DATASTORE_TYPE, KUBECONFIG, ...). build-calico-node.sh copies this file into the release tree
// as cnirewind/calico-node-lite, so it is built as part of that tree's own module, with one version_*.go and one
// allocator_*.go beside it: the two places where the releases' APIs differ (the script picks them by the tree).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/projectcalico/calico/libcalico-go/lib/logutils"
	"github.com/projectcalico/calico/node/pkg/lifecycle/startup"
	"github.com/sirupsen/logrus"
)

func main() {
	runStartup := flag.Bool("startup", false, "calico-node's start-up routine, once")
	runAllocate := flag.Bool("allocate-tunnel-addrs", false, "calico-node's tunnel-address allocator, until stopped")
	version := flag.Bool("v", false, "print the Calico version")
	flag.Parse()
	switch {
	case *version:
		fmt.Println(calicoVersion())
	case *runStartup:
		logrus.SetFormatter(&logutils.Formatter{Component: "startup"})
		startup.Run()
	case *runAllocate:
		logrus.SetFormatter(&logutils.Formatter{Component: "tunnel-ip-allocator"})
		runTunnelAllocator()
	default:
		fmt.Fprintln(os.Stderr, "usage: calico-node-lite -startup | -allocate-tunnel-addrs | -v")
		os.Exit(2)
	}
}
