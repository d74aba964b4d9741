#!/usr/bin/env bash
# Debian's chromium for the browser tests (docs/tracking.md#browser-test): installed when missing, then its
# path is printed. make test calls it through `make chromium`; GPUPLACE_CHROMIUM names another binary.
set -euo pipefail
if [[ -n "${GPUPLACE_CHROMIUM:-}" ]]; then
  echo "$GPUPLACE_CHROMIUM"
  exit 0
fi
if ! command -v chromium >/dev/null 2>&1; then
  sudo=""
  if [[ "$(id -u)" != 0 ]]; then sudo="sudo"; fi
  echo "installing Debian's chromium for the browser tests" >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends chromium >&2 \
    || { $sudo apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=900 install -y -q \
      --no-install-recommends chromium >&2; }
fi
command -v chromium
