#!/usr/bin/env bash
# Eighteenth session, one GPU, issue 24: FP8 step variants in turn (lab.probe_fp8_step --variants VARIANTS; default
# the row as it is and with the CUDA attention releasing o_proj at its start, tuning knob fp8_attention_early).
# TESTS=1: the FP8 fast path's gpu tests first. BENCH=1: the bench of each of BENCH_SHAPES (default the 1.5B; FP8 and bf16 in one call) last.
# Usage: OUT=... BUDGET=300 [TESTS=0] [BENCH=0] [SHAPES=...] [VARIANTS=cuda,cuda/a] [BENCH_SHAPES="a b"] bash scripts/gpu/s18c.sh
#   logs: $OUT/s18c/ (and $OUT/logs.tgz)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window s18c
SHAPES=${SHAPES:-qwen2.5-coder-1.5b,llama-3.2-1b,qwen2.5-coder-3b}
[ "${TESTS:-0}" = 1 ] && step fast-tests 150 "${now[@]}" python3 -m pytest "${PYTEST[@]}" -x \
  tests/inference/test_fp8_fast_path.py
step variants 150 "${now[@]}" python3 -m lab.probe_fp8_step --shapes "$SHAPES" --variants "${VARIANTS:-cuda,cuda/a}"
if [ "${BENCH:-0}" = 1 ]; then
  for s in ${BENCH_SHAPES:-qwen2.5-coder-1.5b}; do
    step "bench-$s" 120 "${now[@]}" python3 -m inference.bench --shape "$s" --weights fp8,bf16 --tokens 256 --ttft 128
  done
fi
tar -czf "$OUT/logs.tgz" -C "$OUT" s18c
summary
grep -E "^\| [a-z]" "$LOG/variants.log"
for f in "$LOG"/bench-*.log; do [ -f "$f" ] && grep -E "^\| (fp8|bfloat16) |speed-up" "$f"; done
true
