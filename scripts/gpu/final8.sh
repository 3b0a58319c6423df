#!/usr/bin/env bash
# Issue 25, the session's end state against $BEFORE (`git archive <rev> inference kernels`) in one call: the edit
# workload on the default model in $MODEL (before / now / now with the verify buckets patched back to 2, 4, 8),
# plain decode before / now (the attention's window block now in every launch), the attention and speculative gpu
# tests (16 columns included), the verify bench.
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BEFORE=.before BUDGET=400 bash scripts/gpu/final8.sh   logs: $OUT/final8/
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window final8
EIGHT="from inference.speculative.fast_verify import FastVerifier; FastVerifier.for_runner.__func__.__defaults__ = ((2, 4, 8),)"
EDIT=(--workload edit --model "$MODEL" --tokens 192 --repeats 1)
DECODE=(--model "$MODEL" --tokens 256 --context 512 --ttft 128)
step edit-before 50 "${before[@]}" python3 -m inference.bench "${EDIT[@]}"
step edit-now 50 "${now[@]}" python3 -m inference.bench "${EDIT[@]}"
step_patched edit-now8 50 "$EIGHT" inference.bench "${EDIT[@]}"
step decode-before 30 "${before[@]}" python3 -m inference.bench "${DECODE[@]}"
step decode-now 30 "${now[@]}" python3 -m inference.bench "${DECODE[@]}"
step tests 150 "${now[@]}" python3 -m pytest "${PYTEST[@]}" -rf tests/kernels/test_decode_attention_cols.py \
  tests/inference/test_speculative_gpu.py
step verify-now 60 "${now[@]}" python3 -m inference.bench --workload verify --model "$MODEL"
tar -czf "$OUT/logs.tgz" -C "$OUT" final8
summary
grep -hE "^FAILED|^E  .*(differ|column|rows)" "$LOG/tests.log" | head -12
for f in edit-before edit-now edit-now8; do echo "$f"; grep -E "\(all\)" "$LOG/$f.log"; done
for f in decode-before decode-now; do echo "$f"; grep -E "^\| bfloat16" "$LOG/$f.log"; done
grep -E "^\| cols" "$LOG/verify-now.log"
true
