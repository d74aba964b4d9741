#!/usr/bin/env bash
# Creates (or reuses) the vLLM referee's own venv: vLLM is a referee for gpuplace's argument lists and its
# scheduler simulation, never a dependency of the project, so it lives apart from .venv, in the user's cache
# (about 10 GB; 5 to 10 minutes on a 2-core machine with a warm network). Prints the venv's python on stdout.
#
# vLLM is installed without its dependencies, then its dependencies with the pins of GPUPLACE_VLLM_OVERRIDES
# swapped ("OLD>NEW", space-separated): vLLM 0.34.0 pins flashinfer-python==0.7.3, which the package index
# these machines reach does not serve (it serves 0.7.2.post1 and 0.7.4). The referee runs vLLM's argument
# parser and scheduler on the CPU, never FlashInfer's kernels.
#
# Overrides: GPUPLACE_VLLM_VERSION (default 0.34.0), GPUPLACE_VLLM_VENV (default ~/.cache/gpuplace/vllm-<version>),
# GPUPLACE_VLLM_OVERRIDES.
set -euo pipefail
VERSION="${GPUPLACE_VLLM_VERSION:-0.34.0}"
VENV="${GPUPLACE_VLLM_VENV:-$HOME/.cache/gpuplace/vllm-$VERSION}"
OVERRIDES="${GPUPLACE_VLLM_OVERRIDES:-flashinfer-python==0.7.3>flashinfer-python==0.7.4}"
PYTHON="${PYTHON:-python3}"
mkdir -p "$(dirname "$VENV")"
if [[ -f "$VENV/.complete" ]]; then echo "$VENV/bin/python"; exit 0; fi
exec 9>"$VENV.lock"
flock 9
if [[ ! -f "$VENV/.complete" ]]; then
  echo "vllm-referee: installing vllm==$VERSION into $VENV (about 10 GB, a few minutes)" >&2
  [[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install --disable-pip-version-check -q --no-deps "vllm==$VERSION" >&2
  "$VENV/bin/python" - "$OVERRIDES" > "$VENV/requirements.txt" <<'EOF'
import sys
from importlib.metadata import requires

swap = dict(pair.split(">", 1) for pair in sys.argv[1].split())
for req in requires("vllm") or []:
    if "extra ==" not in req:
        name = req.split(";", 1)[0].strip()
        print(req.replace(name, swap[name], 1) if name in swap else req)
EOF
  "$VENV/bin/pip" install --disable-pip-version-check -q -r "$VENV/requirements.txt" >&2
  "$VENV/bin/python" -c "import vllm, sys; assert vllm.__version__.startswith('$VERSION'), vllm.__version__" >&2
  touch "$VENV/.complete"
fi
echo "$VENV/bin/python"
