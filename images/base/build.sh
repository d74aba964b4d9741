#!/usr/bin/env bash
# Builds the local base image the gpuplace images are built FROM on a machine that reaches no image
# registry: Debian bookworm (debootstrap, minbase) with Debian's own Python 3.11 (python3, python3-venv,
# python3-pip), committed with buildah. Its tag says what it is, never an upstream image's name:
#   gpuplace.local/debian-python:bookworm-3.11
# Users with a registry keep the official base (images/Dockerfile.* default to python:3.11.11-slim-bookworm).
# Cached: an image with this tag and this script's hash as its label is reused as is.
set -euo pipefail

TAG="${GPUPLACE_BASE_IMAGE:-gpuplace.local/debian-python:bookworm-3.11}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SELF_HASH="$(sha256sum "$0" | cut -c1-16)"

if buildah inspect --type image --format '{{index .ImageAnnotations "io.gpuplace.base-recipe"}}' "$TAG" 2>/dev/null | grep -qx "$SELF_HASH"; then
  echo "base-image: reusing $TAG"
  exit 0
fi
start=$(date +%s)
ROOTFS="$(mktemp -d /var/tmp/gpuplace-base.XXXXXX)"
trap 'rm -rf "$ROOTFS"' EXIT
echo "base-image: debootstrap bookworm into $ROOTFS"
debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
  bookworm "$ROOTFS" "$MIRROR" > "$ROOTFS.log" 2>&1 || { tail -20 "$ROOTFS.log" >&2; exit 1; }
rm -f "$ROOTFS.log"
# Smaller and reproducible enough: no apt lists, caches, docs or man pages in the image.
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/*.bin "$ROOTFS"/var/cache/apt/archives/*.deb \
  "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/locale/*
container="$(buildah from scratch)"
trap 'buildah rm "$container" >/dev/null 2>&1 || true; rm -rf "$ROOTFS"' EXIT
mnt="$(buildah mount "$container")"
cp -a "$ROOTFS"/. "$mnt"/
buildah umount "$container" >/dev/null
buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env LANG=C.UTF-8 \
  --cmd /usr/bin/python3 --annotation "io.gpuplace.base-recipe=$SELF_HASH" \
  --label "org.opencontainers.image.description=Debian bookworm (debootstrap minbase) + Debian python3 3.11, built locally by images/base/build.sh" \
  "$container"
buildah commit --quiet "$container" "$TAG" >/dev/null
echo "base-image: built $TAG in $(( $(date +%s) - start )) s ($(buildah images --format '{{.Size}}' "$TAG"))"
