#!/usr/bin/env bash
# Twenty-first session, one GPU: a change (float16 FP8 scales: bench-results/h100-2026-11-27-session21/fp16-scales.patch,
# applied to this tree) against .before (`git archive 53f05cf inference kernels lab tests/inference`, with this tree's
# tests/inference/test_fp8_fast_path.py): the FP8 kernel gpu tests, the fast path's agreement with the FP8 reference
# (pytest -s; the before tree's too with AGREE_BEFORE=1; TESTS=0 skips both), then the FP8 step before / now and per
# FP8 ring budget (kernels.fp8_stream_gemv.SMEM_BUDGET patched: a measurement, not a setting).
# Usage: OUT=... BUDGET=540 [SHAPES="a b"] [BUDGETS="180 160"] bash scripts/gpu/s21b.sh      logs: $OUT/s21b/, logs.tgz
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window s21b
SHAPES=${SHAPES:-qwen2.5-coder-1.5b llama-3.2-1b qwen2.5-coder-3b}
K="teacher_forced or lm_head_beside or triton_fp8_gemvs_still"
if [ "${TESTS:-1}" = 1 ]; then
  step kernels 150 "${now[@]}" python3 -m pytest "${PYTEST[@]}" -m gpu tests/kernels/test_fp8_gemv.py \
    tests/kernels/test_fp8_cuda_gemv.py tests/kernels/test_fp8_stream_gemv.py tests/kernels/test_fp8_dequantize.py
  [ "${AGREE_BEFORE:-0}" = 1 ] && step agree-before 150 "${before[@]}" python3 -m pytest "${PYTEST[@]}" -s -m gpu \
    tests/inference/test_fp8_fast_path.py -k "$K"
  step agree-now 150 "${now[@]}" python3 -m pytest "${PYTEST[@]}" -s -m gpu tests/inference/test_fp8_fast_path.py -k "$K"
fi
step step-before 90 "${before[@]}" python3 -m lab.probe_fp8_step --shapes "${SHAPES// /,}" --variants cuda
step step-now 90 "${now[@]}" python3 -m lab.probe_fp8_step --shapes "${SHAPES// /,}" --variants cuda
for b in ${BUDGETS:-180 160}; do  # the FP8 rings at most this many KB
  step_patched "step-ring$b" 90 "import kernels.fp8_stream_gemv as s; s.SMEM_BUDGET = $b << 10" lab.probe_fp8_step \
    --shapes "${SHAPES// /,}" --variants cuda
done
tar -czf "$OUT/logs.tgz" -C "$OUT" s21b
summary
for f in "$LOG"/agree-*.log; do [ -f "$f" ] && echo "$(basename "$f")" && grep -oE "fp8 (decode|prefill)[^.]*\.[0-9]+, logits rel err [0-9.e+-]*|miss@.*|[0-9]+ (passed|failed).*" "$f" | cut -c1-160; done
for f in "$LOG"/step-*.log; do [ -f "$f" ] && echo "$(basename "$f")" && grep -E "^\| [a-z]" "$f"; done
true
