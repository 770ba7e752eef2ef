#!/usr/bin/env bash
# Builds vcsim (govmomi's vCenter simulator) from test/vcsim's wrapper main, once, into a cache outside the
# repository keyed by the govmomi version and a hash of go.sum. Prints the binary's path on the last line.
# Why a wrapper: `go install github.com/vmware/govmomi/vcsim@v0.56.0` is refused (nested module with a replace
# directive in its go.mod), so a tiny main in test/vcsim imports its simulator package instead.
set -euo pipefail
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/cache-build.sh"
GOVMOMI=$(sed -n 's/^require github.com\/vmware\/govmomi \(v[^ ]*\).*/\1/p' "$here/go.mod")
sum=$(cat "$here/go.sum" "$here/main.go" | sha256sum | cut -c1-12)
BIN="$cache_root/vcsim-govmomi-${GOVMOMI}_${sum}/vcsim"

cached_or_lock "$BIN" "$cache_root/vcsim-build.lock"
need_go vcsim/build.sh vcsim
mkdir -p "$(dirname "$BIN")"
echo "[vcsim-build] building vcsim from govmomi $GOVMOMI" >&2
started=$SECONDS
(cd "$here" && go build -trimpath -ldflags "-s -w" -o "$BIN.tmp" .)
mv "$BIN.tmp" "$BIN"
record_build_time "vcsim (govmomi $GOVMOMI)" "$started"
echo "$BIN"
