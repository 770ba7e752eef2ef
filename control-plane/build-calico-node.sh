#!/usr/bin/env bash
# Builds Calico's node side for the local test cluster from the upstream release source, once, into the same cache
# as build-calico.sh (its own key: the version and a hash of this recipe and calico-node/main.go). Prints the bin
# directory on the last line.
#
#   build-calico-node.sh v3.28.1 -> <bin>/calico-node-lite (calico-node's -startup and -allocate-tunnel-addrs),
#                                   <bin>/calico and <bin>/calico-ipam (the CNI plugin, one binary by two names)
#
# A separate script so that build-calico.sh, whose hash keys every other Calico program, stays as it is. The source
# archive, its pins and the checks are the same as build-calico.sh's (the pins are read from that script); the
# build shares its lock, its Go module cache and its Go build cache. calico-node itself is not built: its Felix,
# BIRD/confd and BPF parts are most of its compile and none of them runs here (docs/calico-programs.md).
set -euo pipefail
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-buildvcs=false -mod=mod"

tag=${1:-}
die() { echo "build-calico-node.sh: $1" >&2; exit "${2:-2}"; }
here=$(cd "$(dirname "$0")" && pwd)
pin=$(awk -v t="$tag" '$1 == "calico" && $2 == t' "$here/build-calico.sh")
[ -n "$pin" ] || die "unknown Calico version '$tag' (known: $(awk '$1 == "calico" && $2 ~ /^v3/ {printf "%s ", $2}' "$here/build-calico.sh"))"
commit=$(echo "$pin" | awk '{print $3}')
sha=$(echo "$pin" | awk '{print $4}')
file=projectcalico-calico-$tag.tar.gz
bins="calico-node-lite calico calico-ipam"

recipe=$(cat "$0" "$here/calico-node/main.go" | sha256sum | cut -c1-12)
cache_root=${CNI_REWIND_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cni-rewind-e2e}
BIN="$cache_root/calico-programs/node-side-${tag}_$recipe/bin"

have_all() {
  for b in $bins; do [ -x "$BIN/$b" ] || return 1; done
  [ "$(cat "$BIN/.commit" 2>/dev/null)" = "$commit" ]
}
if have_all; then echo "$BIN"; exit 0; fi

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
  url="https://github.com/projectcalico/calico/archive/refs/tags/$tag.tar.gz"
  log "downloading $url"
  curl -fsSL --retry 3 -o "$archive" "$url" || die "could not download $url (set CNI_REWIND_SOURCE_MIRROR to a folder of source archives)" 4
fi
got=$(gzip -dc "$archive" | git get-tar-commit-id || true)
[ "$got" = "$commit" ] || die "$file: tag commit '$got', expected $commit" 4
tar -xzf "$archive" -C "$tmp/src" --strip-components=1
rm -f "$archive"
src="$tmp/src"

with_progress() {
  local what=$1 start=$SECONDS; shift
  "$@" &
  local pid=$!
  while ! wait_for "$pid" 30; do log "$what: still running ($((SECONDS - start)) s)"; done
  wait "$pid" || die "$what failed" 1
  log "$what: done in $((SECONDS - start)) s"
}
wait_for() {
  local i
  for ((i = 0; i < $2; i++)); do kill -0 "$1" 2>/dev/null || return 0; sleep 1; done
  ! kill -0 "$1" 2>/dev/null
}

# The same module fix as build-calico.sh (3.27.4 pins a k8s.io/kubernetes the module proxy does not serve).
sed -i 's#k8s.io/kubernetes => k8s.io/kubernetes v1.27.15#k8s.io/kubernetes => k8s.io/kubernetes v1.27.16#' "$src/go.mod"
# The start-up package moved to node/pkg/lifecycle/startup in 3.27; older trees have node/pkg/startup.
startup=node/pkg/lifecycle/startup
[ -d "$src/$startup" ] || startup=node/pkg/startup
mkdir -p "$src/cnirewind/calico-node-lite"
sed "s#calico/node/pkg/lifecycle/startup\"#calico/$startup\"#" "$here/calico-node/main.go" >"$src/cnirewind/calico-node-lite/main.go"
P=github.com/projectcalico/calico
# startup.VERSION is what start-up writes into ClusterInformation's calicoVersion, as calico-node's build sets it.
LDF="-s -w -X main.VERSION=$tag -X $P/$startup.VERSION=$tag"
with_progress "go build calico-node-lite and the CNI plugin $tag" \
  bash -c "cd '$src' && go build -p 2 -trimpath -ldflags '$LDF' -o '$tmp/' ./cnirewind/calico-node-lite ./cni-plugin/cmd/calico"
cp "$tmp/calico" "$tmp/calico-ipam"
v=$("$tmp/calico-node-lite" -v 2>&1 || true)
[[ $v == "$tag" ]] || die "built calico-node-lite does not report $tag: $v" 1
v=$("$tmp/calico" -v 2>&1 || true)
[[ $v == *"$tag"* ]] || die "built CNI plugin does not report $tag: $v" 1

rm -rf "$src"
echo "$commit" >"$tmp/.commit"
trap - EXIT
rm -rf "$BIN"
mv "$tmp" "$BIN"
log "done: $BIN"
echo "$BIN"
