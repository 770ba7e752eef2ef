#!/usr/bin/env bash
# Builds vcsim (govmomi's vCenter simulator) from test/vcsim's wrapper main, once, into a cache outside the
# repository keyed by the govmomi version and a hash of go.sum. Prints the binary's path on the last line.
# Why a wrapper: `go install github.com/vmware/govmomi/vcsim@v0.56.0` is refused (nested module with a replace
# directive in its go.mod), so a tiny main in test/vcsim imports its simulator package instead.
set -euo pipefail
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
here=$(cd "$(dirname "$0")" && pwd)
GOVMOMI=$(sed -n 's/^require github.com\/vmware\/govmomi \(v[^ ]*\).*/\1/p' "$here/go.mod")
sum=$(cat "$here/go.sum" "$here/main.go" | sha256sum | cut -c1-12)
cache_root=${CNI_REWIND_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cni-rewind-e2e}
BIN="$cache_root/vcsim-govmomi-${GOVMOMI}_${sum}/vcsim"

[ -x "$BIN" ] && { echo "$BIN"; exit 0; }
mkdir -p "$cache_root"
exec 9>"$cache_root/vcsim-build.lock"
flock 9
[ -x "$BIN" ] && { echo "$BIN"; exit 0; }
command -v go >/dev/null || { echo "vcsim/build.sh: Go is required to build vcsim" >&2; exit 4; }
mkdir -p "$(dirname "$BIN")"
echo "[vcsim-build] building vcsim from govmomi $GOVMOMI" >&2
started=$SECONDS
(cd "$here" && go build -trimpath -ldflags "-s -w" -o "$BIN.tmp" .)
mv "$BIN.tmp" "$BIN"
printf '%s\t%s\t%s\n' "$(date +%s)" "vcsim (govmomi $GOVMOMI)" "$((SECONDS - started))" >>"$cache_root/build-times.tsv"
echo "$BIN"
