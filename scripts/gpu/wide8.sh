#!/usr/bin/env bash
# Issue 25: verify steps of 16 columns after a whole draft held (FastVerifier BUCKETS (2, 4, 8, 16),
# DraftConfig.short_draft), against the tree in $BEFORE (`git archive <rev> inference kernels`) and against this
# tree with the buckets patched back to (2, 4, 8), in one call: the verify bench, the edit workload on the default
# model in $MODEL (before / now / now-8, twice), lab.probe_spec_timeline, then the speculative gpu tests.
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BEFORE=.before BUDGET=560 bash scripts/gpu/wide8.sh   logs: $OUT/wide8/
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window wide8
EIGHT="from inference.speculative.fast_verify import FastVerifier; FastVerifier.for_runner.__func__.__defaults__ = ((2, 4, 8),)"
EDIT=(--workload edit --model "$MODEL" --tokens 192 --repeats 1)
step verify-now 90 "${now[@]}" python3 -m inference.bench --workload verify --model "$MODEL"
for r in 1 2; do
  step "edit-before-$r" 60 "${before[@]}" python3 -m inference.bench "${EDIT[@]}"
  step "edit-now-$r" 60 "${now[@]}" python3 -m inference.bench "${EDIT[@]}"
  step_patched "edit-now8-$r" 60 "$EIGHT" inference.bench "${EDIT[@]}"
done
step timeline 45 "${now[@]}" python3 -m lab.probe_spec_timeline --model "$MODEL"
step tests 330 "${now[@]}" python3 -m pytest "${PYTEST[@]}" -x tests/inference/test_speculative_gpu.py
tar -czf "$OUT/logs.tgz" -C "$OUT" wide8
summary
grep -hE "FAILED|Error" "$LOG/tests.log" | head -12
grep -E "^\| cols" "$LOG/verify-now.log"
for f in "$LOG"/edit-*.log; do echo "$(basename "$f")"; grep -E "\(all\)" "$f"; done
tail -22 "$LOG/timeline.log"
true
