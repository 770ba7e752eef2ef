#!/usr/bin/env bash
# Builds the local control plane used by `cni-rewind demo`, `npm run cluster` and the end-to-end tests
# (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd, kwok) from Go modules, once, into a
# cache outside the repository keyed by the versions and a hash of the wrapper modules' go.sum files. Prints the
# bin directory on the last line (stdout); progress goes to stderr, a line at least every 30 s.
#
# Why wrapper modules: `go install k8s.io/kubernetes/cmd/...@v` is refused (the kubernetes module has replace
# directives), so control-plane/k8s/go.mod requires k8s.io/kubernetes and replaces each staging module
# (k8s.io/api, k8s.io/client-go, ...) with its published v0.X.Y; etcd and kwok get the same treatment.
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
log() { echo "[control-plane build $(date +%H:%M:%S)] $*" >&2; }
started=$SECONDS
# Run a build step in the background and say every 30 s that it is still going: a cold build is minutes of
# compiler silence, and a user (or CI log) must be able to tell it from a hang.
step() {
  local what=$1; shift
  log "building $what"
  "$@" &
  local pid=$! t0=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$pid" 2>/dev/null && log "still building $what: $((SECONDS - t0)) s for this step, $((SECONDS - started)) s in all"
  done
  wait "$pid" || { log "building $what failed"; exit 1; }
  log "built $what in $((SECONDS - t0)) s"
}

MINOR=$(echo "$K8S" | cut -d. -f2)
LDF="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LDF+=" -X $p.gitVersion=$K8S -X $p.gitMajor=1 -X $p.gitMinor=$MINOR -X $p.gitTreeState=clean"
  LDF+=" -X $p.gitCommit=0000000000000000000000000000000000000000 -X $p.buildDate=1970-01-01T00:00:00Z"
done

# etcd and kwok are small; build them first so a partial failure is cheap to diagnose.
log "first run: building the local control plane from Go modules into $cache_root (10-30 min on 2 cores, once)"
step "etcd $ETCD" bash -c "cd '$here/etcd' && go build -trimpath -ldflags '-s -w' -o '$tmp/etcd' go.etcd.io/etcd/server/v3"
step "kwok $KWOK" bash -c "cd '$here/kwok' && go build -trimpath -ldflags '-s -w' -o '$tmp/kwok' sigs.k8s.io/kwok/cmd/kwok"
step "kube-apiserver, kube-controller-manager, kube-scheduler and kubectl $K8S" bash -c "cd '$here/k8s' && go build -trimpath -ldflags '$LDF' -o '$tmp/' \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl"

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
log "done in $((SECONDS - started)) s: $BIN"
# For the test run's closing table (test/support/timing-reporter.ts): when it ended, what, how long.
printf '%s\t%s\t%s\n' "$(date +%s)" "control plane (etcd, kwok, kube-* $K8S)" "$((SECONDS - started))" >>"$cache_root/build-times.tsv"
echo "$BIN"
