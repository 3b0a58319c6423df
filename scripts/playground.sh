#!/usr/bin/env bash
# Start the playground on a fresh machine: makes ./.venv and installs the runtime packages into
# it (scripts/_venv.sh), then runs `python manage.py playground` (migrations, Daphne and an
# in-process GPU worker; SQLite and the in-memory channel layer; the default model).
# Arguments go to the command, e.g. `scripts/playground.sh --port 9000`.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_venv.sh
_venv_setup
exec "$PY" manage.py playground "$@"
