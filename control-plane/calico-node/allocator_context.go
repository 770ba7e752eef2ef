package main

import (
	"context"

	"github.com/projectcalico/calico/node/pkg/allocateip"
	"github.com/sirupsen/logrus"
)

// From 3.32: Run(ctx, oneshot) returns an error; calico-node's own main exits on it the same way.
func runTunnelAllocator() {
	if err := allocateip.Run(context.Background(), false); err != nil {
		logrus.WithError(err).Fatal("tunnel address allocator failed")
	}
}
