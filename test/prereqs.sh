#!/usr/bin/env bash
# Everything the tests need besides Node packages, installed or built when missing (run by `npm test` before
# vitest, so the test command works on a fresh machine); quick when everything is present.
# - Debian packages: libvirt + QEMU (the libvirt tests run a real libvirtd on qcow2 disks), qemu-utils, openssl.
# - moto (the AWS EC2 emulator), pinned in test/requirements.txt.
# - the local control plane (control-plane/build.sh), vcsim (test/vcsim/build.sh) and helm 4 and 3 (test/helm/build.sh),
#   built from Go modules once and cached outside the repository.
# A missing piece that cannot be installed here (not root, no apt-get) stops with the command to run: the tests
# would otherwise fail one by one for the same reason.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
say() { echo "[test prereqs $(date +%H:%M:%S)] $*" >&2; }

need_apt=()
command -v openssl >/dev/null || need_apt+=(openssl)
command -v qemu-img >/dev/null || need_apt+=(qemu-utils)
command -v qemu-io >/dev/null || need_apt+=(qemu-utils)
command -v virsh >/dev/null || need_apt+=(libvirt-clients)
[ -x /usr/sbin/libvirtd ] || need_apt+=(libvirt-daemon libvirt-daemon-driver-qemu)
command -v qemu-system-x86_64 >/dev/null || need_apt+=(qemu-system-x86)
dpkg -s qemu-block-extra >/dev/null 2>&1 || need_apt+=(qemu-block-extra)
if [ ${#need_apt[@]} -gt 0 ]; then
  mapfile -t need_apt < <(printf '%s\n' "${need_apt[@]}" | sort -u)
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    say "missing Debian packages: ${need_apt[*]}; install them first: sudo apt-get install ${need_apt[*]}"
    exit 4
  fi
  say "installing Debian packages: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

command -v python3 >/dev/null || { say "python3 is needed for the moto server (AWS tests): sudo apt-get install python3 python3-pip"; exit 4; }
want_moto=$(sed -n 's/^moto\[[^]]*\]==\([0-9.]*\).*/\1/p; s/^moto==\([0-9.]*\).*/\1/p' "$here/requirements.txt" | head -n1)
if ! python3 -c 'import moto, flask' 2>/dev/null || [ "$(python3 -c 'import importlib.metadata as m; print(m.version("moto"))')" != "$want_moto" ]; then
  say "installing the moto server $want_moto (test/requirements.txt)"
  python3 -m pip install -q -r "$here/requirements.txt"
fi

# libvirt without systemd (test/support/libvirtd.ts): the account libvirt-daemon-system would create.
if [ "$(id -u)" = 0 ] && ! getent passwd libvirt-qemu >/dev/null; then
  getent group libvirt-qemu >/dev/null || groupadd -r libvirt-qemu
  useradd -r -g libvirt-qemu -d /var/lib/libvirt -s /usr/sbin/nologin libvirt-qemu
  getent group libvirt >/dev/null || groupadd -r libvirt
fi

command -v go >/dev/null || { say "Go >= 1.26 is needed to build the local control plane, vcsim and helm (go.dev/dl, or your distribution's golang package)"; exit 4; }
cache_root=${CNI_REWIND_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cni-rewind-e2e}
mkdir -p "$cache_root"
# The builds that end from now on are this run's (the closing table of test/support/timing-reporter.ts).
date +%s >"$cache_root/test-run-started"
bash "$root/control-plane/build.sh" >/dev/null
bash "$here/vcsim/build.sh" >/dev/null
bash "$here/helm/build.sh" >/dev/null
bash "$here/helm/build.sh" 3 >/dev/null
# Calico's programs for the tests that run the real tigera operator, API server and kube-controllers (cached; about
# 16 min cold) build in the background while the tests start: the unit tests and the files without them run
# meanwhile, and a test that needs a program waits for it on the build lock. Their source comes from GitHub, or
# from CNI_REWIND_SOURCE_MIRROR; when neither is reachable those tests fail loudly, and every other test still runs.
builder="$cache_root/calico-programs-builder"
if [ -f "$builder.pid" ] && kill -0 "$(cat "$builder.pid")" 2>/dev/null; then
  say "Calico's programs are still being built by an earlier run (pid $(cat "$builder.pid"), log $builder.log)"
else
  # Its own process group, so that the end of the test run can stop it and the compilers it started.
  setsid nohup node "$root/dist/src/dev/local-cluster/build-programs.js" >"$builder.log" 2>&1 </dev/null &
  echo $! >"$builder.pid"
  say "building Calico's programs in the background (pid $!, log $builder.log)"
fi
say "ready"
