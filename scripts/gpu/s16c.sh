#!/usr/bin/env bash
# One GPU: an A/B of a change to the streamed GEMVs (run in the sixteenth session for kernels/csrc/stream_gemv.cu's
# tensor-core consumers on a shared loop, not kept; in the seventeenth for its CUDA-core consumers summing with
# common.cuh's warp_sums: lab/HISTORY.md). TESTS=1 (default): the streamed kernels' gpu tests (bits of every token
# count, the fused tensor-parallel reduction on one GPU), the fast path's CUDA-GEMV tests, the speculative gpu tests
# of the overlap family (verify columns = plain steps bit for bit). Then before ($BEFORE = `git archive <rev>
# inference kernels`) and now, ROUNDS times in turn: `inference.bench --workload verify` on the 1.5B shape, overlap
# family (the default one-token step, the speculating plain step and verify 2 / 4 / 8 / 16). Random weights, ctx 512.
# Usage: OUT=... BUDGET=500 [TESTS=0] [ROUNDS=2] bash scripts/gpu/s16c.sh   logs: $OUT/s16c/ (and $OUT/logs.tgz)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window s16c
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
tar -czf "$OUT/logs.tgz" -C "$OUT" s16c
summary
for f in "$LOG"/verify-*.log; do echo "== $(basename "$f" .log)"; grep -E "^\| overlap|one-token|default" "$f"; done
true
