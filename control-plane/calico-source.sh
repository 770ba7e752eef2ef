# Sourced (never run) by build-calico-release.sh and build-calico-node.sh: the pinned source of one Calico program
# tree, fetched and checked, and the progress lines of a long compile. build-calico.sh keeps its own copy of these
# steps because its hash keys the programs cached before this file existed (calico-releases.pins says why).
# Expects `die MESSAGE [CODE]` from the script that sources it.

log() { echo "[calico-build $(date +%H:%M:%S)] $*" >&2; }

# pin_of KIND TAG: the pin line (kind tag commit sha256) from build-calico.sh's table or calico-releases.pins.
pin_of() {
  awk -v k="$1" -v t="$2" '$1 == k && $2 == t {print $1, $2, $3, $4; exit}' \
    "$calico_source_dir/build-calico.sh" "$calico_source_dir/calico-releases.pins"
}

# known_tags KIND: every pinned tag of that kind, for an error message.
known_tags() {
  awk -v k="$1" '$1 == k && $2 ~ /^v[0-9]/ {printf "%s ", $2}' "$calico_source_dir/build-calico.sh" "$calico_source_dir/calico-releases.pins"
}

# fetch_source REPO TAG FILE COMMIT SHA256 DEST: extracts the tag archive into DEST. From the mirror folder named by
# CNI_REWIND_SOURCE_MIRROR (its file checked against the pinned sha256) or from GitHub's tag archive; either way the
# tag commit in the archive's pax header must be the pinned one.
fetch_source() {
  local repo=$1 tag=$2 file=$3 commit=$4 sha=$5 dest=$6 archive="$6.tar.gz" got
  if [ -n "${CNI_REWIND_SOURCE_MIRROR:-}" ]; then
    [ -f "$CNI_REWIND_SOURCE_MIRROR/$file" ] || die "$file not found in CNI_REWIND_SOURCE_MIRROR ($CNI_REWIND_SOURCE_MIRROR)" 4
    cp "$CNI_REWIND_SOURCE_MIRROR/$file" "$archive"
    got=$(sha256sum "$archive" | cut -d' ' -f1)
    [ "$got" = "$sha" ] || die "$file: sha256 $got, expected $sha" 4
  else
    local url="https://github.com/$repo/archive/refs/tags/$tag.tar.gz"
    log "downloading $url"
    curl -fsSL --retry 3 -o "$archive" "$url" || die "could not download $url (set CNI_REWIND_SOURCE_MIRROR to a folder of source archives)" 4
  fi
  got=$(gzip -dc "$archive" | git get-tar-commit-id || true)
  [ "$got" = "$commit" ] || die "$file: tag commit '$got', expected $commit" 4
  mkdir -p "$dest"
  tar -xzf "$archive" -C "$dest" --strip-components=1
  rm -f "$archive"
}

# with_progress WHAT COMMAND...: runs it with a progress line every 30 s (a cold build takes several minutes) and
# "WHAT: done in N s" at the end, which the test run's build-time table reads.
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
