#!/usr/bin/env bash
# Measure what each fault costs a client on the production layout (real redis-server, Daphne web
# process, playground_worker on the tiny CPU checkpoint): runs tests/playground/test_faults.py and
# prints, per fault, the seconds until the client was told its run's end and until the run's DB
# row was terminal. Each figure is one run of the test (a second time: another sample).
#   bash scripts/reliability.sh            (needs ./.venv from scripts/test.sh and redis-server)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
TRITON_INTERPRET=1 "$PY" -m pytest -q -s -p no:randomly tests/playground/test_faults.py >"$log" 2>&1 || {
  tail -40 "$log"; echo "reliability: the fault tests failed (above)"; exit 1; }
echo "machine: $(nproc) CPU cores, $(uname -m); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs)"
printf '%-66s | %9s | %11s\n' "fault" "told (s)" "terminal (s)"
printf '%-66s-+-%9s-+-%11s\n' "$(printf -- '-%.0s' {1..66})" "---------" "-----------"
grep '^RELIABILITY | ' "$log" | while IFS='|' read -r _ fault told terminal; do
  printf '%-66s | %9s | %11s\n' "$(echo $fault)" "$(echo $told)" "$(echo $terminal)"
done
grep '^flood: ' "$log" || true
