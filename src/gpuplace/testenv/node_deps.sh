#!/usr/bin/env bash
# Installs what a real testenv node runs on (`gpuplace testenv up --real-node`, docs/testenv.md) from Debian's
# packages when any is missing: containerd and runc (crun refuses cgroups v1 hybrid), the CNI plugins
# (/usr/lib/cni), iptables, and busybox-static (the node tests' image, gpuplace.testenv.localimages). `images` adds what `make images` builds with: buildah, debootstrap, skopeo.
# A no-op when all are installed; needs root (or sudo) otherwise.
set -euo pipefail

PACKAGES=(containerd runc containernetworking-plugins iptables busybox-static)
if [[ "${1:-}" == images ]]; then PACKAGES=(buildah debootstrap skopeo uidmap); fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && { echo "node-deps: ${PACKAGES[*]} installed"; exit 0; }

command -v apt-get >/dev/null || { echo "node-deps: need ${missing[*]} and there is no apt-get; install them by hand" >&2; exit 1; }
SUDO=""
if [[ $(id -u) != 0 ]]; then
  command -v sudo >/dev/null || { echo "node-deps: need ${missing[*]}: run as root or install them" >&2; exit 1; }
  SUDO=sudo
fi
echo "node-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y --no-install-recommends "${missing[@]}" || {
  $SUDO apt-get update && $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
}
