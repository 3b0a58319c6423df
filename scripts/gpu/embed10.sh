#!/usr/bin/env bash
# A verify step's input columns in one launch (kernels.embed_cols) against $BEFORE (a copy, an index_select and a
# cast): the kernel's and the speculative gpu tests, the verify bench and the edit workload (best of 3 per prompt),
# before / now / now, on the default model.
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BEFORE=.before BUDGET=400 bash scripts/gpu/embed10.sh   logs: $OUT/embed10/
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window embed10
EDIT=(--workload edit --model "$MODEL" --tokens 192 --repeats 3)
step tests 150 "${now[@]}" python3 -m pytest "${PYTEST[@]}" -x -rfE tests/kernels/test_embed_cols.py \
  tests/inference/test_speculative_gpu.py
step verify-before 40 "${before[@]}" python3 -m inference.bench --workload verify --model "$MODEL"
step verify-now 40 "${now[@]}" python3 -m inference.bench --workload verify --model "$MODEL"
step edit-before 70 "${before[@]}" python3 -m inference.bench "${EDIT[@]}"
step edit-now-1 70 "${now[@]}" python3 -m inference.bench "${EDIT[@]}"
step edit-now-2 70 "${now[@]}" python3 -m inference.bench "${EDIT[@]}"
tar -czf "$OUT/logs.tgz" -C "$OUT" embed10
summary
for f in verify-before verify-now; do echo "$f"; grep -E "^\| cols" "$LOG/$f.log"; done
for f in edit-before edit-now-1 edit-now-2; do echo "$f"; grep -E "\(all\)" "$LOG/$f.log"; done
true
