package main

import "github.com/projectcalico/calico/node/pkg/lifecycle/startup"

// Up to 3.30 the version lives in the start-up package (calico-node's build sets it with -X).
func calicoVersion() string { return startup.VERSION }
