#!/usr/bin/env bash
# Builds the real `helm` program from its Go module, once, into a cache outside the repository keyed by the version
# and a hash of go.sum: Helm 4 (helm.sh/helm/v4, pinned in test/helm/go.mod) by default, Helm 3 (helm.sh/helm/v3,
# test/helm/v3/go.mod) with the argument 3, the Helm most clusters are still managed with. Prints the binary's path
# on the last line. The e2e tests that install Calico's tigera-operator chart run it (test/e2e/helm-install.test.ts);
# cni-rewind itself runs whichever helm its user gives it. Cold: about 2 min of compiling on 2 cores each, plus the
# module downloads when the module cache is empty.
set -euo pipefail
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/cache-build.sh"
case "${1:-4}" in
  4) major=v4 mod="$here" ;;
  3) major=v3 mod="$here/v3" ;;
  *) echo "helm/build.sh: usage: build.sh [3|4]" >&2; exit 2 ;;
esac
HELM=$(sed -n "s/^[[:space:]]*\(require \)\{0,1\}helm.sh\/helm\/$major \(v[^ ]*\).*/\2/p" "$mod/go.mod")
[ -n "$HELM" ] || { echo "helm/build.sh: no helm.sh/helm/$major version in $mod/go.mod" >&2; exit 4; }
sum=$(cat "$mod/go.sum" "$here/build.sh" | sha256sum | cut -c1-12)
BIN="$cache_root/helm-${HELM}_${sum}/helm"

cached_or_lock "$BIN" "$cache_root/helm-build.lock"
need_go helm/build.sh "helm $HELM"
mkdir -p "$(dirname "$BIN")"
echo "[helm-build] building helm $HELM" >&2
started=$SECONDS
# `helm version` reports what its Makefile stamps in; without it the program calls itself by its major version only.
(cd "$mod" && go build -trimpath -ldflags "-s -w -X helm.sh/helm/$major/internal/version.version=$HELM" -o "$BIN.tmp" "helm.sh/helm/$major/cmd/helm") ||
  { echo "helm/build.sh: building helm $HELM failed (output above); the Helm e2e tests need it" >&2; exit 4; }
mv "$BIN.tmp" "$BIN"
record_build_time "helm $HELM" "$started"
echo "$BIN"
