#!/usr/bin/env bash
# Packages Calico's tigera-operator Helm chart from the release's own source tree, as Calico's Makefile does for a
# release (`helm package ./charts/tigera-operator --version <tag> --app-version <tag>`: the tree's Chart.yaml says
# v0.0, the version is stamped when packaging), once per tag, into the cache beside the helm binary. Prints the
# chart archive's path on the last line.
#
#   chart.sh v3.28.1
#
# Source: projectcalico-calico-<tag>.tar.gz in CNI_REWIND_SOURCE_MIRROR, or the upstream tag archive; either is
# checked against the tag commit (and the mirror file against its sha256) pinned in control-plane/build-calico.sh,
# which is read here, never changed.
set -euo pipefail
tag=${1:-}
die() { echo "helm/chart.sh: $1" >&2; exit "${2:-2}"; }
[ -n "$tag" ] || die "usage: chart.sh <calico tag, e.g. v3.28.1>"
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/cache-build.sh"
pin=$(awk -v t="$tag" '$1 == "calico" && $2 == t { print $3, $4 }' "$here/../../control-plane/build-calico.sh")
[ -n "$pin" ] || die "no pin for calico $tag in control-plane/build-calico.sh"
read -r commit sha <<<"$pin"
helm=$(bash "$here/build.sh" | tail -n1)
recipe=$(cat "$0" | sha256sum | cut -c1-12)
out="$cache_root/helm-charts/tigera-operator-${tag}_${recipe}"
chart="$out/tigera-operator-$tag.tgz"

cached_or_lock "$chart" "$cache_root/helm-charts/build.lock"
tmp="$out.tmp"
rm -rf "$tmp"
mkdir -p "$tmp/src"
trap 'rm -rf "$tmp"' EXIT
file=projectcalico-calico-$tag.tar.gz
archive="$tmp/$file"
if [ -n "${CNI_REWIND_SOURCE_MIRROR:-}" ]; then
  [ -f "$CNI_REWIND_SOURCE_MIRROR/$file" ] || die "$file not found in CNI_REWIND_SOURCE_MIRROR ($CNI_REWIND_SOURCE_MIRROR)" 4
  cp "$CNI_REWIND_SOURCE_MIRROR/$file" "$archive"
  got=$(sha256sum "$archive" | cut -d' ' -f1)
  [ "$got" = "$sha" ] || die "$file: sha256 $got, expected $sha" 4
else
  url="https://github.com/projectcalico/calico/archive/refs/tags/$tag.tar.gz"
  curl -fsSL --retry 3 -o "$archive" "$url" || die "could not download $url (set CNI_REWIND_SOURCE_MIRROR to a folder of source archives)" 4
fi
got=$(gzip -dc "$archive" | git get-tar-commit-id || true)
[ "$got" = "$commit" ] || die "$file: tag commit '$got', expected $commit" 4
# The chart's crds/calico is a symbolic link to libcalico-go/config/crd: both trees are needed.
tar -xzf "$archive" -C "$tmp/src" --strip-components=1 "calico-$tag/charts/tigera-operator" "calico-$tag/libcalico-go/config/crd"
# Its own HOME: nothing of the user's Helm or kube setup is read or written.
HOME="$tmp/home" "$helm" package "$tmp/src/charts/tigera-operator" --destination "$tmp" --version "$tag" --app-version "$tag" >&2 ||
  die "helm package of charts/tigera-operator ($tag) failed" 1
mkdir -p "$out"
mv "$tmp/tigera-operator-$tag.tgz" "$chart"
echo "$chart"
