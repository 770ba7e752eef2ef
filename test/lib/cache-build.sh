# Sourced (never run) by the scripts that build a test tool once into the e2e cache outside the repository
# (test/helm/build.sh, test/helm/chart.sh, test/vcsim/build.sh): where that cache is, the check-lock-check around a
# build that every checkout on the machine shares, and the build-times record the end of a test run reads. What a
# script builds and the key it caches it under stay in the script.

cache_root=${CNI_REWIND_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cni-rewind-e2e}

# cached_or_lock ARTIFACT LOCK: prints ARTIFACT and ends the script when it is there; otherwise waits for LOCK (held
# while another process builds the same thing), looks again, and returns holding LOCK (fd 9) to build it. A build
# writes a temporary name and renames it: ARTIFACT there means built.
cached_or_lock() {
  [ -f "$1" ] && { echo "$1"; exit 0; }
  mkdir -p "$(dirname "$2")"
  exec 9>"$2"
  flock 9
  [ -f "$1" ] && { echo "$1"; exit 0; }
  return 0
}

# need_go SCRIPT WHAT: exit 4 (environment) naming what needs Go, as test/prereqs.sh reads it.
need_go() {
  command -v go >/dev/null || { echo "$1: Go is required to build $2" >&2; exit 4; }
}

# record_build_time WHAT STARTED: one line of build-times.tsv, STARTED being $SECONDS when the build began.
record_build_time() {
  printf '%s\t%s\t%s\n' "$(date +%s)" "$1" "$((SECONDS - $2))" >>"$cache_root/build-times.tsv"
}
