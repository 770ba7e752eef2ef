#!/usr/bin/env bash
# Builds the real control plane used by the end-to-end tests (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, etcd, kwok) from Go modules, once, into a cache outside the repository keyed by
# the versions and a hash of the wrapper modules' go.sum files. Prints the bin directory on the last line.
#
# Why wrapper modules: `go install k8s.io/kubernetes/cmd/...@v` is refused (replace directives), so
# test/e2e-cluster/k8s/go.mod requires k8s.io/kubernetes and replaces each staging module with its
# published v0.X.Y (see shared/guides/test-cluster.md §2).
set -euo pipefail
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false

K8S=v1.36.3
ETCD=v3.6.16
KWOK=v0.8.0
here=$(cd "$(dirname "$0")" && pwd)

sum=$(cat "$here/k8s/go.sum" "$here/etcd/go.sum" "$here/kwok/go.sum" | sha256sum | cut -c1-12)
cache_root=${CNI_REWIND_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cni-rewind-e2e}
BIN="$cache_root/k8s-${K8S}_etcd-${ETCD}_kwok-${KWOK}_${sum}/bin"

have_all() {
  for b in kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok; do
    [ -x "$BIN/$b" ] || return 1
  done
  [ -f "$BIN/kwok-stages/pod_fast_pod-ready.yaml" ] || return 1
  "$BIN/kube-apiserver" --version 2>/dev/null | grep -q "Kubernetes $K8S"
}

if have_all; then
  echo "$BIN"
  exit 0
fi

# One build at a time per cache: concurrent callers wait here, then find the binaries built.
mkdir -p "$cache_root"
exec 9>"$cache_root/build.lock"
flock 9
if have_all; then
  echo "$BIN"
  exit 0
fi

command -v go >/dev/null || { echo "build.sh: Go is required (go 1.26) to build the test control plane" >&2; exit 4; }

tmp="$BIN.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
log() { echo "[e2e-build $(date +%H:%M:%S)] $*" >&2; }

MINOR=$(echo "$K8S" | cut -d. -f2)
LDF="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LDF+=" -X $p.gitVersion=$K8S -X $p.gitMajor=1 -X $p.gitMinor=$MINOR -X $p.gitTreeState=clean"
  LDF+=" -X $p.gitCommit=0000000000000000000000000000000000000000 -X $p.buildDate=1970-01-01T00:00:00Z"
done

# etcd and kwok are small; build them first so a partial failure is cheap to diagnose.
log "building etcd $ETCD"
(cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
log "building kwok $KWOK"
(cd "$here/kwok" && go build -trimpath -ldflags "-s -w" -o "$tmp/kwok" sigs.k8s.io/kwok/cmd/kwok)
log "building kube-apiserver, kube-controller-manager, kube-scheduler, kubectl $K8S (cold: 15-30 min on 2 cores)"
(cd "$here/k8s" && go build -trimpath -ldflags "$LDF" -o "$tmp/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)

# kwok's stage definitions ship in its module; the standalone binary has none built in.
KWOK_DIR=$(cd "$here/kwok" && go mod download -json "sigs.k8s.io/kwok@$KWOK" | node -p 'JSON.parse(require("fs").readFileSync(0,"utf8")).Dir')
mkdir -p "$tmp/kwok-stages"
for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml pod/fast/pod-ready.yaml \
         pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml node/chaos/node-not-ready.yaml; do
  cp "$KWOK_DIR/kustomize/stage/$f" "$tmp/kwok-stages/$(echo "$f" | tr / _)"
done

"$tmp/kube-apiserver" --version >&2
rm -rf "$BIN"
mv "$tmp" "$BIN"
log "done: $BIN"
echo "$BIN"
