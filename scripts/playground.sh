#!/usr/bin/env bash
# Start the playground on a fresh machine: installs the runtime packages, then runs
# `python manage.py playground` (migrations, Daphne and an in-process GPU worker; SQLite and the
# in-memory channel layer). Arguments go to the command, e.g. `scripts/playground.sh --port 9000`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! $PY -c "import torch" >/dev/null 2>&1; then
  if command -v nvidia-smi >/dev/null 2>&1; then $PY -m pip install -q torch; else $PY -m pip install -q "torch==2.13.0"; fi
fi
$PY -c "import django, channels, daphne, tokenizers, safetensors" >/dev/null 2>&1 || $PY -m pip install -q -e .
exec $PY manage.py playground "$@"
