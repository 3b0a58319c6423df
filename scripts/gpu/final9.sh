#!/usr/bin/env bash
# Issue 25, ninth session's end state against $BEFORE in one call: the edit workload (best of 3 per prompt) before /
# now / before / now (the drafter's max_match 4 -> 6), the verify bench on this card, the cols family's verify
# step kernel by kernel at 8 and 16 columns (where a 16-column step's time goes), the speculative gpu tests.
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BEFORE=.before BUDGET=400 bash scripts/gpu/final9.sh   logs: $OUT/final9/
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window final9
EDIT=(--workload edit --model "$MODEL" --tokens 192 --repeats 3)
step edit-before-1 70 "${before[@]}" python3 -m inference.bench "${EDIT[@]}"
step edit-now-1 70 "${now[@]}" python3 -m inference.bench "${EDIT[@]}"
step edit-before-2 70 "${before[@]}" python3 -m inference.bench "${EDIT[@]}"
step edit-now-2 70 "${now[@]}" python3 -m inference.bench "${EDIT[@]}"
step verify-now 60 "${now[@]}" python3 -m inference.bench --workload verify --model "$MODEL"
step profile 60 "${now[@]}" python3 -m lab.profile_verify --model "$MODEL" --families cols --widths 8,16
step tests 120 "${now[@]}" python3 -m pytest "${PYTEST[@]}" -rf tests/inference/test_speculative_gpu.py
tar -czf "$OUT/logs.tgz" -C "$OUT" final9
summary
for f in edit-before-1 edit-now-1 edit-before-2 edit-now-2; do echo "$f"; grep -E "\(all\)" "$LOG/$f.log"; done
grep -E "^\| cols" "$LOG/verify-now.log"
grep -E "^\| " "$LOG/profile.log" | tail -14
true
