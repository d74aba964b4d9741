#!/usr/bin/env bash
# A venv with only what a bare GPU machine has for the GPU check (issue 35): the core dependencies
# (pyproject.toml's [project] dependencies), nvidia-ml-py, the serving extra for the closed loop (aiohttp,
# transformers[serving]) and pytest. No kfp, mlflow, kubernetes or cryptography, and gpuplace is NOT
# installed: tests/gpu/run.sh runs it from the source tree (PYTHONPATH=src), as on the GPU machine.
#
#   bash tests/gpu/bare_venv.sh        prints the venv's python
#
# Cached under ~/.cache/gpuplace/bare-venv/<hash of this file, pyproject.toml and constraints.txt>: the
# first build installs from the pip cache that make venv filled (torch alone is most of it); later calls
# reuse it. tests/integration/test_gpu_check_bare.py builds it and refuses one that holds a forbidden package.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
key=$(cat tests/gpu/bare_venv.sh pyproject.toml constraints.txt | sha256sum | cut -c1-12)
root=${GPUPLACE_CACHE:-$HOME/.cache/gpuplace}/bare-venv
venv=$root/$key
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.complete" ]; then
  mkdir -p "$root"
  # an earlier version's venvs go: each is a torch install (GBs)
  find "$root" -mindepth 1 -maxdepth 1 ! -name "$key" -exec rm -rf {} + 2>/dev/null || true
  rm -rf "$venv"
  "$PY" -m venv "$venv" >&2
  core=$("$PY" - <<'PYEOF'
import tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
print(" ".join(deps))
PYEOF
)
  # shellcheck disable=SC2086
  "$venv/bin/pip" install --disable-pip-version-check -q -c constraints.txt $core nvidia-ml-py aiohttp \
    'transformers[serving]' pytest >&2
  for forbidden in kfp mlflow kubernetes cryptography; do
    if "$venv/bin/python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$forbidden') is None)"; then
      echo "bare venv: $forbidden came in as a dependency of the core packages; the GPU check must run without it" >&2
      exit 1
    fi
  done
  touch "$venv/.complete"
fi
echo "$venv/bin/python"
