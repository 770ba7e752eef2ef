#!/usr/bin/env bash
# Builds Calico's node side for the local test cluster from the upstream release source, once, into the same cache
# as build-calico.sh (its own key: the version and a hash of this recipe, calico-source.sh and calico-node/*.go).
# Prints the bin directory on the last line.
#
#   build-calico-node.sh v3.28.1 -> <bin>/calico-node-lite (calico-node's -startup and -allocate-tunnel-addrs),
#                                   <bin>/calico and <bin>/calico-ipam (the CNI plugin, one binary by two names)
#
# A separate script so that build-calico.sh, whose hash keys every other Calico program, stays as it is. The source
# archive, its pins and the checks are the same as build-calico.sh's (calico-source.sh reads the pins from that
# script and from calico-releases.pins); the build shares its lock, its Go module cache and its Go build cache.
# calico-node itself is not built: its Felix, BIRD/confd and BPF parts are most of its compile and none of them
# runs here (docs/calico-programs.md).
set -euo pipefail
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-buildvcs=false -mod=mod"

tag=${1:-}
die() { echo "build-calico-node.sh: $1" >&2; exit "${2:-2}"; }
here=$(cd "$(dirname "$0")" && pwd)
calico_source_dir=$here
# shellcheck source=calico-source.sh
. "$here/calico-source.sh"
pin=$(pin_of calico "$tag")
[ -n "$pin" ] || die "unknown Calico version '$tag' (known: $(known_tags calico))"
read -r _ _ commit sha <<<"$pin"
file=projectcalico-calico-$tag.tar.gz
bins="calico-node-lite calico calico-ipam"
NODE_LITE_FILES="main.go version_startup.go version_buildinfo.go allocator_done_channel.go allocator_context.go"

# Every file of calico-node/, in this order (calico-programs.ts recipeOf hashes the same list).
recipe=$( { cat "$0" "$here/calico-source.sh"; cd "$here/calico-node" && cat $NODE_LITE_FILES; } | sha256sum | cut -c1-12)
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

tmp="$BIN.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
src="$tmp/src"
fetch_source projectcalico/calico "$tag" "$file" "$commit" "$sha" "$src"

# The same module fix as build-calico.sh (3.27.4 pins a k8s.io/kubernetes the module proxy does not serve).
sed -i 's#k8s.io/kubernetes => k8s.io/kubernetes v1.27.15#k8s.io/kubernetes => k8s.io/kubernetes v1.27.16#' "$src/go.mod"
# The start-up package moved to node/pkg/lifecycle/startup in 3.27; older trees have node/pkg/startup.
startup=node/pkg/lifecycle/startup
[ -d "$src/$startup" ] || startup=node/pkg/startup
lite="$src/cnirewind/calico-node-lite"
mkdir -p "$lite"
# The two places the releases' APIs differ, one file each chosen by the tree: where the version lives
# (startup.VERSION up to 3.30, pkg/buildinfo from 3.31) and the allocator's Run (a done channel up to 3.31,
# (ctx, oneshot) returning an error from 3.32).
version_go=version_startup.go
grep -q 'VERSION' "$src/$startup/startup.go" || version_go=version_buildinfo.go
allocator_go=allocator_done_channel.go
grep -q '^func Run(ctx context.Context' "$src/node/pkg/allocateip/allocateip.go" && allocator_go=allocator_context.go
for f in main.go "$version_go" "$allocator_go"; do
  sed "s#calico/node/pkg/lifecycle/startup\"#calico/$startup\"#" "$here/calico-node/$f" >"$lite/$f"
done
P=github.com/projectcalico/calico
# The version is what start-up writes into ClusterInformation's calicoVersion, as calico-node's build sets it
# (startup.VERSION up to 3.30, pkg/buildinfo.Version from 3.31; -X of a variable a tree lacks is ignored).
LDF="-s -w -X main.VERSION=$tag -X $P/$startup.VERSION=$tag -X $P/pkg/buildinfo.Version=$tag -X $P/pkg/buildinfo.GitRevision=${commit:0:12}"
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
