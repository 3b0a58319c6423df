#!/usr/bin/env bash
# The CUDA-core column GEMVs' launch shape chosen per column count within what sets the bits
# (kernels.cols_gemv.config_for / bits_key, issue 25), against the tree in $BEFORE (`git archive <rev> inference
# kernels`) in the same call: the kernel tests and the speculative gpu tests (each column the same bits for any
# count; speculative greedy = plain greedy), the verify bench and the edit workload on the default model in $MODEL,
# before / now / before again.
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BEFORE=.before BUDGET=500 bash scripts/gpu/count7.sh   logs: $OUT/count7/
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window count7
step kernel-tests 120 "${now[@]}" python3 -m pytest "${PYTEST[@]}" tests/kernels/test_cols_gemv.py
step spec-tests 150 "${now[@]}" python3 -m pytest "${PYTEST[@]}" tests/inference/test_speculative_gpu.py
step verify-before 60 "${before[@]}" python3 -m inference.bench --workload verify --model "$MODEL" --json "$LOG/verify-before.json"
step verify-now 60 "${now[@]}" python3 -m inference.bench --workload verify --model "$MODEL" --json "$LOG/verify-now.json"
step edit-before 60 "${before[@]}" python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1 --json "$LOG/edit-before.json"
step edit-now 60 "${now[@]}" python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1 --json "$LOG/edit-now.json"
step edit-before-again 60 "${before[@]}" python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1
step edit-now-again 60 "${now[@]}" python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1
tar -czf "$OUT/logs.tgz" -C "$OUT" count7
summary
grep -hE "FAILED|Error" "$LOG/kernel-tests.log" "$LOG/spec-tests.log" | head -12
for f in verify-before verify-now; do echo "$f"; grep -E "^\| cols" "$LOG/$f.log"; done
for f in edit-before edit-now edit-before-again edit-now-again; do echo "$f"; grep -E "\(all\)" "$LOG/$f.log"; done
true
