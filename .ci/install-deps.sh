#!/usr/bin/env bash
# System packages and Python tools the tests need; idempotent, quick when everything is present.
set -euo pipefail
need_apt=()
command -v openssl >/dev/null || need_apt+=(openssl)
command -v qemu-img >/dev/null || need_apt+=(qemu-utils)
command -v virsh >/dev/null || need_apt+=(libvirt-clients)
[ -x /usr/sbin/libvirtd ] || need_apt+=(libvirt-daemon libvirt-daemon-driver-qemu)
command -v qemu-system-x86_64 >/dev/null || need_apt+=(qemu-system-x86)
command -v qemu-io >/dev/null || need_apt+=(qemu-utils)
dpkg -s qemu-block-extra >/dev/null 2>&1 || need_apt+=(qemu-block-extra)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "== installing Debian packages: ${need_apt[*]}"
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
if ! python3 -c 'import moto, flask' 2>/dev/null || [ "$(python3 -c 'import importlib.metadata as m; print(m.version("moto"))')" != "5.2.1" ]; then
  echo "== installing moto server (pinned in test/requirements.txt)"
  python3 -m pip install -q -r test/requirements.txt
fi
# libvirt without systemd (test/support/libvirtd.ts): the account libvirt-daemon-system would create.
if [ "$(id -u)" = 0 ] && ! getent passwd libvirt-qemu >/dev/null; then
  getent group libvirt-qemu >/dev/null || groupadd -r libvirt-qemu
  useradd -r -g libvirt-qemu -d /var/lib/libvirt -s /usr/sbin/nologin libvirt-qemu
  getent group libvirt >/dev/null || groupadd -r libvirt
fi
# vcsim for the vSphere tests, built once from Go modules into ~/.cache (quick when cached).
bash "$(dirname "$0")/../test/vcsim/build.sh" >/dev/null
