#!/usr/bin/env bash
# Every GPU test of the engine and the kernels, with the failures named at the end (one log file).
# Run from the repo root on the device (or through scripts/gpu/all.sh check); env: OUT, LIMIT_TESTS (s).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
timeout "${LIMIT_TESTS:-280}" python3 -m pytest -m gpu tests/kernels tests/inference -q -p no:cacheprovider \
  -o addopts="" -rfE --tb=line > "$OUT/gpu-tests.log" 2>&1
rc=$?
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/gpu-tests.log" | tail -30
exit $rc
