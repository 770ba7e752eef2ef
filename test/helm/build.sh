#!/usr/bin/env bash
# Builds the real `helm` program from its Go module (helm.sh/helm/v4, pinned in test/helm/go.mod), once, into a cache
# outside the repository keyed by the version and a hash of go.sum. Prints the binary's path on the last line.
# The e2e tests that install Calico's tigera-operator chart run it (test/e2e/helm-install.test.ts); cni-rewind itself
# never runs helm. Cold: about 2 min of compiling on 2 cores, plus the module downloads when the module cache is empty.
set -euo pipefail
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/cache-build.sh"
HELM=$(sed -n 's/^[[:space:]]*\(require \)\{0,1\}helm.sh\/helm\/v4 \(v[^ ]*\).*/\2/p' "$here/go.mod")
[ -n "$HELM" ] || { echo "helm/build.sh: no helm.sh/helm/v4 version in $here/go.mod" >&2; exit 4; }
sum=$(cat "$here/go.sum" "$here/build.sh" | sha256sum | cut -c1-12)
BIN="$cache_root/helm-${HELM}_${sum}/helm"

cached_or_lock "$BIN" "$cache_root/helm-build.lock"
need_go helm/build.sh "helm $HELM"
mkdir -p "$(dirname "$BIN")"
echo "[helm-build] building helm $HELM" >&2
started=$SECONDS
# `helm version` reports what its Makefile stamps in; without it the program calls itself v4.3.
(cd "$here" && go build -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM" -o "$BIN.tmp" helm.sh/helm/v4/cmd/helm) ||
  { echo "helm/build.sh: building helm $HELM failed (output above); the Helm e2e tests need it" >&2; exit 4; }
mv "$BIN.tmp" "$BIN"
record_build_time "helm $HELM" "$started"
echo "$BIN"
