#!/usr/bin/env bash
# Creates (or reuses) the vLLM referee's own venv: vLLM is a referee for gpuplace's argument lists and its
# scheduler simulation, never a dependency of the project, so it lives apart from .venv, in the user's cache
# (about 10 GB; 5 minutes on a 2-core machine with a warm network). Prints the venv's python on stdout.
#
# Overrides: GPUPLACE_VLLM_VERSION (default 0.33.0), GPUPLACE_VLLM_VENV (default ~/.cache/gpuplace/vllm-<version>).
set -euo pipefail
VERSION="${GPUPLACE_VLLM_VERSION:-0.33.0}"
VENV="${GPUPLACE_VLLM_VENV:-$HOME/.cache/gpuplace/vllm-$VERSION}"
PYTHON="${PYTHON:-python3}"
mkdir -p "$(dirname "$VENV")"
if [[ -f "$VENV/.complete" ]]; then echo "$VENV/bin/python"; exit 0; fi
exec 9>"$VENV.lock"
flock 9
if [[ ! -f "$VENV/.complete" ]]; then
  echo "vllm-referee: installing vllm==$VERSION into $VENV (about 10 GB, a few minutes)" >&2
  [[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install --disable-pip-version-check -q "vllm==$VERSION" >&2
  "$VENV/bin/python" -c "import vllm, sys; assert vllm.__version__.startswith('$VERSION'), vllm.__version__" >&2
  touch "$VENV/.complete"
fi
echo "$VENV/bin/python"
