#!/usr/bin/env bash
# Packages Calico's tigera-operator Helm chart from the release's own source tree, as Calico's Makefile does for a
# release (`helm package ./charts/tigera-operator --version <tag> --app-version <tag>`: the tree's Chart.yaml says
# v0.0, the version is stamped when packaging), once per tag, into the cache beside the helm binary. Prints the
# chart archive's path on the last line.
#
#   chart.sh v3.28.1
#
# Source: projectcalico-calico-<tag>.tar.gz in CNI_REWIND_SOURCE_MIRROR, or the upstream tag archive; either is
# checked against the tag commit (and the mirror file against its sha256) pinned in control-plane/build-calico.sh or
# control-plane/calico-releases.pins, by the same steps as the program builds (control-plane/calico-source.sh).
set -euo pipefail
tag=${1:-}
die() { echo "helm/chart.sh: $1" >&2; exit "${2:-2}"; }
[ -n "$tag" ] || die "usage: chart.sh <calico tag, e.g. v3.28.1>"
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/cache-build.sh"
calico_source_dir="$here/../../control-plane"
# shellcheck source=../../control-plane/calico-source.sh
. "$calico_source_dir/calico-source.sh"
pin=$(pin_of calico "$tag")
[ -n "$pin" ] || die "no pin for calico $tag in control-plane/build-calico.sh or calico-releases.pins"
read -r _ _ commit sha <<<"$pin"
helm=$(bash "$here/build.sh" | tail -n1)
recipe=$(cat "$0" "$calico_source_dir/calico-source.sh" | sha256sum | cut -c1-12)
out="$cache_root/helm-charts/tigera-operator-${tag}_${recipe}"
chart="$out/tigera-operator-$tag.tgz"

cached_or_lock "$chart" "$cache_root/helm-charts/build.lock"
tmp="$out.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
# The chart's crds/calico is a symbolic link to libcalico-go/config/crd: the whole tree is extracted.
fetch_source projectcalico/calico "$tag" "projectcalico-calico-$tag.tar.gz" "$commit" "$sha" "$tmp/src"
# Its own HOME: nothing of the user's Helm or kube setup is read or written.
HOME="$tmp/home" "$helm" package "$tmp/src/charts/tigera-operator" --destination "$tmp" --version "$tag" --app-version "$tag" >&2 ||
  die "helm package of charts/tigera-operator ($tag) failed" 1
mkdir -p "$out"
mv "$tmp/tigera-operator-$tag.tgz" "$chart"
echo "$chart"
