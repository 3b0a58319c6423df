#!/usr/bin/env bash
# Issue 25, ninth session: the drafter's settings from the replay with the host's gaps (max_match 6, no back-off
# after a miss, a run starts with DraftConfig.lag in flight) against $BEFORE in one call: the edit workload twice
# each (before / now) and once with DraftConfig.lag 1 (patched: a measurement, not a setting); the timeline of
# the new loop; the speculative gpu tests.
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BEFORE=.before BUDGET=420 bash scripts/gpu/draft9.sh   logs: $OUT/draft9/
# Ran on an intermediate tree that was not committed (bench-results/h100-2026-11-26-session9/README.txt).
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window draft9
EDIT=(--workload edit --model "$MODEL" --tokens 192 --repeats 1)
step edit-before-1 50 "${before[@]}" python3 -m inference.bench "${EDIT[@]}"
step edit-now-1 50 "${now[@]}" python3 -m inference.bench "${EDIT[@]}"
step edit-before-2 50 "${before[@]}" python3 -m inference.bench "${EDIT[@]}"
step edit-now-2 50 "${now[@]}" python3 -m inference.bench "${EDIT[@]}"
step_patched edit-now-lag1 50 "$(draft_cfg lag=1)" inference.bench "${EDIT[@]}"
step timeline 60 "${now[@]}" python3 -m lab.probe_spec_timeline --model "$MODEL"
step tests 150 "${now[@]}" python3 -m pytest "${PYTEST[@]}" -rf tests/inference/test_speculative_gpu.py
tar -czf "$OUT/logs.tgz" -C "$OUT" draft9
summary
for f in edit-before-1 edit-now-1 edit-before-2 edit-now-2 edit-now-lag1; do echo "$f"; grep -E "\(all\)" "$LOG/$f.log"; done
grep -E "^smollm2, speculation|^\| (plain|chained|verify)" "$LOG/timeline.log" | head -12
true
