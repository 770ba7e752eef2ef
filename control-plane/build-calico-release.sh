#!/usr/bin/env bash
# Builds the Calico programs of a release pinned in calico-releases.pins for the local test cluster from the
# upstream release source, once, into the cache build-calico.sh uses, keyed by the version and a hash of this
# recipe and the release's own pin line (adding a release rebuilds nothing else). Prints the bin directory last.
#
#   build-calico-release.sh operator v1.42.3 -> <bin>/operator
#   build-calico-release.sh calico v3.32.1   -> <bin>/apiserver, <bin>/calicoctl, <bin>/kube-controllers
#
# The same steps as build-calico.sh's, plus what the newer trees need (below); the node side of these releases is
# built by build-calico-node.sh, which reads the same pins.
set -euo pipefail
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-buildvcs=false -mod=mod"

kind=${1:-}
tag=${2:-}
die() { echo "build-calico-release.sh: $1" >&2; exit "${2:-2}"; }
here=$(cd "$(dirname "$0")" && pwd)
calico_source_dir=$here
# shellcheck source=calico-source.sh
. "$here/calico-source.sh"

pin=$(awk -v k="$kind" -v t="$tag" '$1 == k && $2 == t {print $1, $2, $3, $4; exit}' "$here/calico-releases.pins")
[ -n "$pin" ] || die "unknown program or version '$kind $tag' (known: $(awk '$1 ~ /^(operator|calico)$/ {printf "%s %s, ", $1, $2}' "$here/calico-releases.pins"))"
read -r _ _ commit sha <<<"$pin"
case $kind in
  operator) repo=tigera/operator; file=tigera-operator-$tag.tar.gz; bins="operator" ;;
  calico) repo=projectcalico/calico; file=projectcalico-calico-$tag.tar.gz; bins="apiserver calicoctl kube-controllers" ;;
esac

recipe=$( { cat "$0" "$here/calico-source.sh"; echo "$pin"; } | sha256sum | cut -c1-12)
cache_root=${CNI_REWIND_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cni-rewind-e2e}
BIN="$cache_root/calico-programs/$kind-${tag}_$recipe/bin"

have_all() {
  for b in $bins; do [ -x "$BIN/$b" ] || return 1; done
  [ "$(cat "$BIN/.commit" 2>/dev/null)" = "$commit" ]
}
if have_all; then echo "$BIN"; exit 0; fi

# One Calico build at a time per cache, shared with build-calico.sh (the machine has few cores).
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
fetch_source "$repo" "$tag" "$file" "$commit" "$sha" "$src"

short=${commit:0:12}
case $kind in
  operator)
    # openshift/library-go pulls vbom.ml/util into the module graph; it is not served and never compiled.
    mkdir -p "$src/stub/vbom-util"
    echo "module vbom.ml/util" >"$src/stub/vbom-util/go.mod"
    echo "replace vbom.ml/util => ./stub/vbom-util" >>"$src/go.mod"
    # v1.40+ embeds Istio's charts (pkg/render/istio: base, istiod, cni, ztunnel .tgz), which its Makefile downloads
    # and the tag's tree does not hold. Empty files let go:embed compile; the Istio controller then has no charts,
    # and nothing in the local cluster creates an Istio resource.
    if [ -d "$src/pkg/render/istio" ]; then
      for c in $(sed -n 's#^[[:space:]]*//go:embed \([a-z]*\.tgz\)$#\1#p' "$src"/pkg/render/istio/*.go); do
        [ -e "$src/pkg/render/istio/$c" ] || : >"$src/pkg/render/istio/$c"
      done
    fi
    # v1.40.15 pins a github.com/tigera/api pseudo-version the module proxy does not serve; it compiles against
    # v1.42.3's (served) pin, whose types it uses are the same.
    if grep -q 'github.com/tigera/api v0.0.0-20250916150902-b8353932c447' "$src/go.mod"; then
      echo "replace github.com/tigera/api => github.com/tigera/api v0.0.0-20260310182635-546021df243c" >>"$src/go.mod"
    fi
    main=.
    [ -f "$src/cmd/main.go" ] && main=./cmd
    with_progress "go build operator $tag" \
      bash -c "cd '$src' && go build -p 2 -trimpath -ldflags '-s -w -X github.com/tigera/operator/version.VERSION=$tag' -o '$tmp/operator' $main"
    v=$("$tmp/operator" --version 2>/dev/null || true)
    [[ $v == *"Operator: $tag"* ]] || die "built operator does not report $tag: $v" 1
    ;;
  calico)
    P=github.com/projectcalico/calico
    LDF="-s -w -X main.VERSION=$tag"
    LDF+=" -X $P/calicoctl/calicoctl/commands.VERSION=$tag -X $P/calicoctl/calicoctl/commands.GIT_REVISION=$short"
    LDF+=" -X $P/calicoctl/calicoctl/commands/common.VERSION=$tag"
    LDF+=" -X $P/apiserver/cmd/apiserver/server.VERSION=$tag -X $P/apiserver/cmd/apiserver/server.GIT_REVISION=$short"
    # From 3.31 every program reads its version from pkg/buildinfo (lib.Makefile LDFLAGS); -X of a variable a tree
    # lacks is ignored, so both sets are given.
    LDF+=" -X $P/pkg/buildinfo.Version=$tag -X $P/pkg/buildinfo.GitRevision=$short"
    with_progress "go build apiserver calicoctl kube-controllers $tag" \
      bash -c "cd '$src' && go build -p 2 -trimpath -ldflags '$LDF' -o '$tmp/' ./apiserver/cmd/apiserver ./calicoctl/calicoctl ./kube-controllers/cmd/kube-controllers"
    v=$(DATASTORE_TYPE=kubernetes KUBECONFIG=/nonexistent timeout 20 "$tmp/calicoctl" version 2>&1 || true)
    [[ $v == *"$tag"* ]] || die "built calicoctl does not report $tag: $v" 1
    ;;
esac

rm -rf "$src"
echo "$commit" >"$tmp/.commit"
trap - EXIT
rm -rf "$BIN"
mv "$tmp" "$BIN"
log "done: $BIN"
echo "$BIN"
