#!/usr/bin/env bash
# Run every test on a fresh machine: installs what the suite needs, then runs pytest.
#   Debian packages: redis-server (real channel-layer tests) and chromium (real-browser test)
#   PyTorch: the CPU build where there is no GPU (a bare `torch` would pull GBs of CUDA packages)
#   Python packages: this project with its [test] extras (transformers, triton's interpreter, ...)
# Extra arguments go to pytest, e.g. `scripts/test.sh tests/inference -k sampling`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing Debian packages: ${need[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

if ! $PY -c "import torch" >/dev/null 2>&1; then
  if command -v nvidia-smi >/dev/null 2>&1; then
    $PY -m pip install -q torch
  else
    echo "== installing the CPU build of PyTorch"
    $PY -m pip install -q "torch==2.13.0"
  fi
fi
echo "== installing Python packages"
$PY -m pip install -q -e ".[test]"

echo "== running tests"
export TRITON_INTERPRET=${TRITON_INTERPRET:-$($PY -c "import torch; print(0 if torch.cuda.is_available() else 1)")}
exec $PY -m pytest -q "$@"
