#!/usr/bin/env bash
# Seventeenth session, one GPU: kernels/csrc/stream_gemv.cu's CUDA-core consumers (QKV / o_proj, the ring-fed
# down_proj) sum a warp's per-token partials with common.cuh's warp_sums (scattered over the lanes, the same bits)
# instead of a full xor tree per token and row. The streamed kernels' gpu tests (bits of every token count, the
# fused tensor-parallel reduction on one GPU), the fast path's CUDA-GEMV tests, the speculative gpu tests of the
# overlap family; then before ($BEFORE = `git archive <rev> inference kernels`) and now, ROUNDS times in turn:
# `inference.bench --workload verify` on the 1.5B shape, overlap family (the default one-token step, the speculating
# plain step and verify 2 / 4 / 8 / 16). Random weights, ctx 512.
# Usage: OUT=... BUDGET=500 [TESTS=0] [ROUNDS=2] bash scripts/gpu/s17d.sh   logs: $OUT/s17d/ (and $OUT/logs.tgz)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window s17d
export PYTHONFAULTHANDLER=1
T=(python3 -m pytest -q -x -p no:randomly -p no:cacheprovider -o addopts="" -o faulthandler_timeout=120)
if [ "${TESTS:-1}" = 1 ]; then
  step kernel-tests 180 "${now[@]}" "${T[@]}" -m gpu tests/kernels/test_stream_gemv.py tests/kernels/test_stream_lm_head.py \
    tests/kernels/test_fused_reduce.py
  step fast-tests 90 "${now[@]}" "${T[@]}" tests/inference/test_fast_path.py -k cuda_gemvs
  step spec-tests 200 "${now[@]}" "${T[@]}" tests/inference/test_speculative_gpu.py -k overlap
fi
for r in $(seq 1 "${ROUNDS:-2}"); do
  for t in before now; do
    eval "pre=(\"\${$t[@]}\")"
    step "verify-$t-$r" 90 "${pre[@]}" python3 -m inference.bench --workload verify --shape qwen2.5-coder-1.5b \
      --context 512 --families overlap
  done
done
tar -czf "$OUT/logs.tgz" -C "$OUT" s17d
summary
for f in "$LOG"/verify-*.log; do echo "== $(basename "$f" .log)"; grep -E "^\| overlap|one-token|default" "$f"; done
true
