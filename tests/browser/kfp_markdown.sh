#!/usr/bin/env bash
# The Markdown renderer of the Kubeflow Pipelines UI, for tests/integration/test_browser_kfp_outputs.py
# (docs/tracking.md#browser-tests): the UI's MarkdownViewer renders a Markdown output with markdown-to-jsx
# under React 16 (kubeflow/pipelines frontend/package.json). The same npm packages, at pinned versions, are
# installed once into ~/.cache/gpuplace/kfp-markdown (npm from Debian when missing); the folder holding
# node_modules is printed. GPUPLACE_KFP_MARKDOWN names another such folder.
set -euo pipefail
if [[ -n "${GPUPLACE_KFP_MARKDOWN:-}" ]]; then
  echo "$GPUPLACE_KFP_MARKDOWN"
  exit 0
fi
dir="${XDG_CACHE_HOME:-$HOME/.cache}/gpuplace/kfp-markdown"
packages=(markdown-to-jsx@6.11.4 react@16.14.0 react-dom@16.14.0 prop-types@15.8.1 unquote@1.1.1)
stamp="$dir/.installed-$(echo "${packages[*]}" | md5sum | cut -c1-12)"
if [[ ! -f "$stamp" ]]; then
  if ! command -v npm >/dev/null 2>&1; then
    sudo=""
    if [[ "$(id -u)" != 0 ]]; then sudo="sudo"; fi
    echo "installing Debian's npm for the KFP UI's Markdown renderer" >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends npm >&2
  fi
  mkdir -p "$dir"
  echo "installing ${packages[*]} into $dir" >&2
  npm install --no-audit --no-fund --no-save --ignore-scripts --prefix "$dir" "${packages[@]}" >&2
  touch "$stamp"
fi
echo "$dir"
