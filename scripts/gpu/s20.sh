#!/usr/bin/env bash
# Twentieth session, one GPU, issue 24: the FP8 engine's LM head in int8 (inference.quant.Int8Weight).
#   PART=1: the 8-bit GEMV, FP8 fast-path and step-plan gpu tests, the greedy LM head launch per format and config
#           (lab.probe_head8), the FP8 step before (.before: the 16-bit head) / now in turn (lab.probe_fp8_step).
#   PART=2: the quality gate on the real model at $MODEL (fast path, FP8 and bf16 against float32; run after
#           `bash scripts/gpu/model.sh join` with PYTHONPATH=/tmp/site), then inference.bench --weights fp8,bf16
#           per shape (SHAPES), a table last.
# Usage: OUT=... BUDGET=540 PART=1|2 [TESTS=0] [HEAD8=0] [SHAPES="a b"] [ROUNDS=2] bash scripts/gpu/s20.sh      logs: $OUT/$NAME/, logs.tgz
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
NAME=${NAME:-s20}  # the log folder (scripts/gpu/s21.sh runs this script as s21)
window "$NAME"
SHAPES=${SHAPES:-qwen2.5-coder-1.5b llama-3.2-1b qwen2.5-coder-3b}
if [ "${PART:-1}" = 1 ]; then
  [ "${TESTS:-1}" = 1 ] && step tests 270 "${now[@]}" python3 -m pytest "${PYTEST[@]}" -m gpu tests/kernels/test_fp8_gemv.py \
    tests/kernels/test_fp8_cuda_gemv.py tests/kernels/test_fp8_stream_gemv.py tests/kernels/test_fp8_dequantize.py tests/inference/test_fp8_fast_path.py \
    tests/inference/test_step_plan.py
  [ "${HEAD8:-1}" = 1 ] && step head8 120 "${now[@]}" python3 -m lab.probe_head8 --shapes "${SHAPES// /,}" --configs
  for r in $(seq "${ROUNDS:-2}"); do
    step "step-before-$r" 90 "${before[@]}" python3 -m lab.probe_fp8_step --shapes "${SHAPES// /,}" --variants cuda
    step "step-now-$r" 90 "${now[@]}" python3 -m lab.probe_fp8_step --shapes "${SHAPES// /,}" --variants cuda
  done
else
  if [ -f "$MODEL" ]; then
    for w in fp8 bf16; do
      step "quality-$w" 100 "${now[@]}" python3 -m inference.quality --model "$MODEL" --device cuda --weights "$w" \
        --tokens 2048 --window 512 --json "$LOG/quality-$w.json"
    done
  fi
  for s in $SHAPES; do
    step "bench-$s" 110 "${now[@]}" python3 -m inference.bench --shape "$s" --weights fp8,bf16 --tokens 256 \
      --ttft 128 --json "$LOG/bench-$s.json"
  done
fi
tar -czf "$OUT/logs.tgz" -C "$OUT" "$NAME"
summary
[ -f "$LOG/head8.log" ] && sed -n '/^| shape/,$p' "$LOG/head8.log"
for f in "$LOG"/step-*.log; do [ -f "$f" ] && echo "$(basename "$f")" && grep -E "^\| [a-z]" "$f"; done
for w in fp8 bf16; do [ -f "$LOG/quality-$w.log" ] && echo "quality-$w" && tail -3 "$LOG/quality-$w.log"; done
for f in "$LOG"/bench-*.log; do [ -f "$f" ] && grep -E "^\| (fp8|bfloat16) |speed-up" "$f"; done
true
