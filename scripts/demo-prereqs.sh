#!/usr/bin/env bash
# What `npm run demo` needs besides Node: Go (to build the local control plane once) and qemu-utils
# (qemu-img/qemu-io for the demo's node disk images). Installs qemu-utils when missing and run as root.
set -euo pipefail
command -v go >/dev/null || { echo "demo: Go >= 1.26 is needed to build the local control plane (apt-get install golang-go, or go.dev)" >&2; exit 4; }
command -v openssl >/dev/null || { echo "demo: openssl is needed for the local control plane's certificates" >&2; exit 4; }
if ! command -v qemu-img >/dev/null || ! command -v qemu-io >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "demo: installing qemu-utils (qemu-img, qemu-io) for the demo's node disk images"
    apt-get -o DPkg::Lock::Timeout=600 update -qq && apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends qemu-utils >/dev/null
  else
    echo "demo: qemu-img and qemu-io are needed: sudo apt-get install qemu-utils" >&2; exit 4
  fi
fi
