package main

import "github.com/projectcalico/calico/node/pkg/allocateip"

// Up to 3.31: Run(done <-chan struct{}) runs until done is closed (never, here: until the process is stopped).
func runTunnelAllocator() { allocateip.Run(make(chan struct{})) }
