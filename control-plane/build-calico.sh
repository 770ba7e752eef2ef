#!/usr/bin/env bash
# Builds Calico's own control-plane programs for the local test cluster from the upstream release source, once,
# into a cache outside the repository keyed by the version and a hash of this recipe. Prints the bin directory
# on the last line.
#
#   build-calico.sh operator v1.34.3   -> <bin>/operator
#   build-calico.sh calico v3.28.1     -> <bin>/apiserver, <bin>/calicoctl, <bin>/kube-controllers
#   build-calico.sh ipam-driver v3.28.1 -> <bin>/ipam-driver (control-plane/ipam-driver on that tree's libcalico-go)
#
# Source: the upstream tag archive (https://github.com/<repo>/archive/refs/tags/<tag>.tar.gz), or the file of
# the same tree in the directory named by CNI_REWIND_SOURCE_MIRROR (git-archive files named
# tigera-operator-<tag>.tar.gz / projectcalico-calico-<tag>.tar.gz). Every git-archive tarball carries its tag
# commit id in a pax header, so the commit id pinned below is checked for both; a mirror file is also checked
# against its pinned sha256. Building from source is needed because the Go module proxy does not serve most of
# these module versions (docs/calico-programs.md).
set -euo pipefail
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-buildvcs=false -mod=mod"

kind=${1:-}
tag=${2:-}
die() { echo "build-calico.sh: $1" >&2; exit "${2:-2}"; }

# kind tag commit sha256-of-mirror-file
PINS="
operator v1.32.10 c9baef614ed3f3c4a3764843228e36f66a88bcb6 1dcc51be4a26c50b7fa3e00facba33879a097a3a382d571764446499859d4d57
operator v1.34.3 feba8ee90b5c134fe3c67caddf2a1a713644701e 02e732959f99dfbdb1bf5b11ae33c13ae3b4992e39101c9b3851f56adbfb697c
operator v1.36.16 fdb10d5c1b619137f2e50cbdcb4c9012364d6ed7 f61e7693a72b2d7dc301bd5dffbdf18b6caeb1c24a379946d7300ccf340b958a
operator v1.38.13 43aa9e8bd54dfee582e4e83105eeea5d5d06bcdd 0e4258102305cdecccef8c810b2cacb0ed09edaa151175f7e7e1b6376ed39c86
calico v3.27.4 2183fee023b03f9f4efdbd9b32fe4dedfead1d17 95c959462274b5fd73006546d062170c32181f15209a21185d498e31ddc97b3a
calico v3.28.1 6018563438f3aacf5e043dea0c567abe5d34c08a 2afe8b419d4ddd10165e4e2b6b75c33ae054c73d459824ea66c01df7b8586c4b
calico v3.29.7 82fd18c202ac5400cd7760597a510de9d028b035 9e20b03304400476dfd683ec463c171f0acafb78cfb43d7bd83364b4c7638d18
calico v3.30.7 74485ea40911c4868ae83ddb5da489c1533d1dba fd37f84efa2aa4b11743c06c58e66270b2ebcb544148715cd11a25ab4e581fd8
"
# The IPAM driver is built on a Calico tree: same pins, same archive.
pinkind=$kind
[ "$kind" = ipam-driver ] && pinkind=calico
pin=$(echo "$PINS" | awk -v k="$pinkind" -v t="$tag" '$1 == k && $2 == t')
[ -n "$pin" ] || die "unknown program or version '$kind $tag' (known: $(echo "$PINS" | awk 'NF {printf "%s %s, ", $1, $2}'))"
commit=$(echo "$pin" | awk '{print $3}')
sha=$(echo "$pin" | awk '{print $4}')
case $kind in
  operator) repo=tigera/operator; file=tigera-operator-$tag.tar.gz; bins="operator" ;;
  calico) repo=projectcalico/calico; file=projectcalico-calico-$tag.tar.gz; bins="apiserver calicoctl kube-controllers" ;;
  ipam-driver) repo=projectcalico/calico; file=projectcalico-calico-$tag.tar.gz; bins="ipam-driver" ;;
esac

here=$(cd "$(dirname "$0")" && pwd)
recipe=$(sha256sum "$0" | cut -c1-12)
# The driver's own source is part of its recipe.
[ "$kind" = ipam-driver ] && recipe=$(cat "$0" "$here/ipam-driver/go.mod" "$here/ipam-driver/main.go" | sha256sum | cut -c1-12)
cache_root=${CNI_REWIND_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cni-rewind-e2e}
BIN="$cache_root/calico-programs/$kind-${tag}_$recipe/bin"

have_all() {
  for b in $bins; do [ -x "$BIN/$b" ] || return 1; done
  [ "$(cat "$BIN/.commit" 2>/dev/null)" = "$commit" ]
}
if have_all; then echo "$BIN"; exit 0; fi

# One Calico build at a time per cache (the machine has few cores): concurrent callers wait, then reuse it.
mkdir -p "$cache_root/calico-programs"
exec 9>"$cache_root/calico-programs/build.lock"
flock 9
if have_all; then echo "$BIN"; exit 0; fi
command -v go >/dev/null || die "Go is required (go >= 1.26) to build Calico's programs" 4

log() { echo "[calico-build $(date +%H:%M:%S)] $*" >&2; }
tmp="$BIN.tmp"
rm -rf "$tmp"
mkdir -p "$tmp/src"
trap 'rm -rf "$tmp"' EXIT

archive="$tmp/$file"
if [ -n "${CNI_REWIND_SOURCE_MIRROR:-}" ]; then
  [ -f "$CNI_REWIND_SOURCE_MIRROR/$file" ] || die "$file not found in CNI_REWIND_SOURCE_MIRROR ($CNI_REWIND_SOURCE_MIRROR)" 4
  cp "$CNI_REWIND_SOURCE_MIRROR/$file" "$archive"
  got=$(sha256sum "$archive" | cut -d' ' -f1)
  [ "$got" = "$sha" ] || die "$file: sha256 $got, expected $sha" 4
else
  url="https://github.com/$repo/archive/refs/tags/$tag.tar.gz"
  log "downloading $url"
  curl -fsSL --retry 3 -o "$archive" "$url" || die "could not download $url (set CNI_REWIND_SOURCE_MIRROR to a folder of source archives)" 4
fi
got=$(gzip -dc "$archive" | git get-tar-commit-id || true)
[ "$got" = "$commit" ] || die "$file: tag commit '$got', expected $commit" 4
tar -xzf "$archive" -C "$tmp/src" --strip-components=1
rm -f "$archive"
src="$tmp/src"

# Runs a long command with a progress line every 30 s (a cold build takes several minutes).
with_progress() {
  local what=$1 start=$SECONDS; shift
  "$@" &
  local pid=$!
  while ! wait_for "$pid" 30; do log "$what: still running ($((SECONDS - start)) s)"; done
  wait "$pid" || die "$what failed" 1
  log "$what: done in $((SECONDS - start)) s"
}
wait_for() { # pid seconds: 0 when the process has ended within that time
  local i
  for ((i = 0; i < $2; i++)); do kill -0 "$1" 2>/dev/null || return 0; sleep 1; done
  ! kill -0 "$1" 2>/dev/null
}

short=${commit:0:12}
case $kind in
  operator)
    # openshift/library-go pulls vbom.ml/util into the module graph; it is not served and never compiled.
    mkdir -p "$src/stub/vbom-util"
    echo "module vbom.ml/util" >"$src/stub/vbom-util/go.mod"
    echo "replace vbom.ml/util => ./stub/vbom-util" >>"$src/go.mod"
    # The main package moved from the module root to ./cmd in v1.38 (its Makefile builds ./cmd/main.go).
    main=.
    [ -f "$src/cmd/main.go" ] && main=./cmd
    with_progress "go build operator $tag" \
      bash -c "cd '$src' && go build -p 2 -trimpath -ldflags '-s -w -X github.com/tigera/operator/version.VERSION=$tag' -o '$tmp/operator' $main"
    # Capture first: with pipefail, `grep -q` closing the pipe early would fail the check.
    v=$("$tmp/operator" --version 2>/dev/null || true)
    [[ $v == *"Operator: $tag"* ]] || die "built operator does not report $tag: $v" 1
    ;;
  calico)
    # k8s.io/kubernetes v1.27.15 (pinned by the 3.27 tree) is not served by the module proxy; v1.27.16 is.
    sed -i 's#k8s.io/kubernetes => k8s.io/kubernetes v1.27.15#k8s.io/kubernetes => k8s.io/kubernetes v1.27.16#' "$src/go.mod"
    P=github.com/projectcalico/calico
    LDF="-s -w -X main.VERSION=$tag"
    LDF+=" -X $P/calicoctl/calicoctl/commands.VERSION=$tag -X $P/calicoctl/calicoctl/commands.GIT_REVISION=$short"
    LDF+=" -X $P/calicoctl/calicoctl/commands/common.VERSION=$tag"
    LDF+=" -X $P/apiserver/cmd/apiserver/server.VERSION=$tag -X $P/apiserver/cmd/apiserver/server.GIT_REVISION=$short"
    with_progress "go build apiserver calicoctl kube-controllers $tag" \
      bash -c "cd '$src' && go build -p 2 -trimpath -ldflags '$LDF' -o '$tmp/' ./apiserver/cmd/apiserver ./calicoctl/calicoctl ./kube-controllers/cmd/kube-controllers"
    # It prints its own version before it looks for a datastore (a kubeconfig that does not exist: fails fast).
    v=$(DATASTORE_TYPE=kubernetes KUBECONFIG=/nonexistent timeout 20 "$tmp/calicoctl" version 2>&1 || true)
    [[ $v == *"$tag"* ]] || die "built calicoctl does not report $tag: $v" 1
    ;;
  ipam-driver)
    # A module of its own whose replace lines point at the tree extracted into ./calico (ipam-driver/go.mod); the
    # tree's go.sum covers the same dependency versions.
    drv="$tmp/driver"
    mkdir -p "$drv"
    cp "$here/ipam-driver/go.mod" "$here/ipam-driver/main.go" "$drv/"
    cp "$src/go.sum" "$drv/go.sum"
    mv "$src" "$drv/calico"
    src="$drv"
    with_progress "go build ipam-driver ($tag libcalico-go)" \
      bash -c "cd '$drv' && go build -p 2 -trimpath -ldflags '-s -w' -o '$tmp/ipam-driver' ."
    v=$("$tmp/ipam-driver" 2>&1 || true)
    [[ $v == *"usage: ipam-driver"* ]] || die "built ipam-driver does not run: $v" 1
    ;;
esac

rm -rf "$src"
echo "$commit" >"$tmp/.commit"
trap - EXIT
rm -rf "$BIN"
mv "$tmp" "$BIN"
log "done: $BIN"
echo "$BIN"
