package main

import "github.com/projectcalico/calico/pkg/buildinfo"

// From 3.31 every program reads its version from pkg/buildinfo (lib.Makefile LDFLAGS).
func calicoVersion() string { return buildinfo.Version }
