#!/usr/bin/env bash
# make images: builds the images in images/ with buildah on a local base (images/base/build.sh), and records
# the ones that run here (no GPU: components, cpu) for the real testenv node, which streams them from buildah's
# storage into its containerd (gpuplace.testenv.nodeimages): <name>.tag and <name>.id (buildah's image id) in
# ~/.cache/gpuplace/images, or $GPUPLACE_IMAGES_CACHE. No archive is written: the CPU image's took 6.4 GB, on a
# disk a CI run filled (docs/development.md#disk); an archive left by an earlier version is removed.
# Which: IMAGES="components cpu cuda vllm" (default: all); which the node loads: NODE_IMAGES (default
# "components cpu"; the CUDA and vLLM images cannot run without a GPU).
#
# Local builds are tagged gpuplace.local/gpuplace-<name>:<version>-debian-bookworm: built here, on the
# local Debian base, not the images the pipelines name (ghcr.io/gpuplace/...), which are built on the
# official Python base. buildah's layer cache (--layers) makes a second build with no change quick.
#
# --force-rm: a build that fails (or is stopped) removes its working container, which otherwise keeps
# gigabytes of half-installed layer on the disk.
# cgroups v1 hybrid and RLIMIT_NOFILE hard 20000 here: builds run with chroot isolation (no runtime
# needed) and nofile 20000 (the default ulimit asks for more and is refused).
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGES="${IMAGES:-components cpu cuda vllm}"
OUT="${GPUPLACE_IMAGES_CACHE:-$HOME/.cache/gpuplace/images}"
BASE="${GPUPLACE_BASE_IMAGE:-gpuplace.local/debian-python:bookworm-3.11}"
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)"
[[ -n "$VERSION" ]] || VERSION="$(sed -n 's/^__version__ = "\(.*\)"/\1/p' src/gpuplace/__init__.py | head -1)"
mkdir -p "$OUT"

bash src/gpuplace/testenv/node_deps.sh images
bash images/base/build.sh

# This machine's pip settings (an index mirror, a CA bundle for a TLS-inspecting proxy) are bind-mounted
# into the build's RUN steps only: they reach pip, and are not committed into any image.
MOUNTS=()
for f in /etc/pip.conf "${PIP_CERT:-}" "${PIP_CONFIG_FILE:-}"; do
  [[ -n "$f" && -f "$f" ]] && MOUNTS+=(-v "$f:$f:ro")
done
if [[ -f /etc/pip.conf ]]; then
  cert="$(sed -n 's/^\s*cert\s*=\s*//p' /etc/pip.conf | head -1)"
  [[ -n "$cert" && -f "$cert" ]] && MOUNTS+=(-v "$cert:$cert:ro")
fi

# No pip cache is mounted into the builds: this machine's PyPI mirror sends no cache headers, so pip's HTTP
# cache stores nothing (measured: an empty --cache-dir after a download). The layer cache does the caching.
NODE_IMAGES="${NODE_IMAGES:-${ARCHIVES:-components cpu}}"  # ARCHIVES: its earlier name

# The CPU image takes torch from PyTorch's CPU index; where it cannot be reached, from PyPI (larger: CUDA).
TORCH_INDEX_URL="${GPUPLACE_TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}"
if ! curl -fsS -o /dev/null --max-time 10 "$TORCH_INDEX_URL/torch/" 2>/dev/null; then
  echo "images: $TORCH_INDEX_URL cannot be reached; the CPU image takes torch from PyPI"
  TORCH_INDEX_URL=https://pypi.org/simple
fi
# The torch layer is keyed on torch's pin alone, so a change elsewhere in constraints.txt reuses it.
TORCH_REQUIREMENT="$(grep -m1 '^torch==' constraints.txt)"
[[ -n "$TORCH_REQUIREMENT" ]] || { echo "images: constraints.txt pins no torch==" >&2; exit 2; }
VLLM_VERSION="${GPUPLACE_VLLM_VERSION:-0.34.0}"  # the version of the referee venv (tests/referee/vllm_venv.sh)

for name in $IMAGES; do
  [[ -f "images/Dockerfile.$name" ]] || { echo "images: no images/Dockerfile.$name" >&2; exit 2; }
  tag="gpuplace.local/gpuplace-$name:$VERSION-debian-bookworm"
  base="$BASE"
  # The vLLM image is built on the same base, vLLM's wheel bringing its own torch (vllm/vllm-openai cannot be
  # pulled here; images/Dockerfile.vllm).
  start=$(date +%s)
  echo "images: building $tag (FROM $base)"
  buildah bud --layers --force-rm --isolation chroot --ulimit nofile=20000:20000 --quiet "${MOUNTS[@]}" \
    --build-arg "BASE_IMAGE=$base" --build-arg "TORCH_INDEX_URL=$TORCH_INDEX_URL" \
    --build-arg "VLLM_VERSION=$VLLM_VERSION" --build-arg "TORCH_REQUIREMENT=$TORCH_REQUIREMENT" -f "images/Dockerfile.$name" -t "$tag" . > "$OUT/$name.build.log" 2>&1 \
    || { tail -30 "$OUT/$name.build.log" >&2; exit 1; }
  id="$(buildah inspect --type image --format '{{.FromImageID}}' "$tag")"
  rm -f "$OUT/$name.tar"  # written by earlier versions of this script
  if [[ " $NODE_IMAGES " == *" $name "* ]]; then echo "$id" > "$OUT/$name.id"; else rm -f "$OUT/$name.id"; fi
  size="$(buildah images --format '{{.Size}}' "$tag" | head -1)"
  echo "$tag" > "$OUT/$name.tag"
  echo "images: $tag: $size, $(( $(date +%s) - start )) s"
done
# A rebuilt image leaves its previous build dangling (untagged): remove those, keep the layer cache.
buildah rmi --prune >/dev/null 2>&1 || true
