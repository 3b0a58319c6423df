#!/usr/bin/env bash
# After moving the FP8 kernels' staging and unpacking into kernels/csrc/fp8_common.cuh: the FP8 kernel gpu tests
# (CUDA-core, streamed, csrc) and the FP8 step with CUDA-core kernels only (cuda/c) and the row's streaming (cuda)
# on the 1.5B and 3B (compare with bench-results/h200-2026-11-26-session5/fp8stream-3/). Usage: OUT=... bash $0
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD
timeout 200 python3 -m pytest -q -p no:cacheprovider -p no:randomly -o addopts="" -rfE -m gpu \
  tests/kernels/test_fp8_cuda_gemv.py tests/kernels/test_fp8_stream_gemv.py tests/kernels/test_csrc.py > "$OUT/k.log" 2>&1
echo "kernel tests rc=$?: $(tail -1 "$OUT/k.log")"
grep -E "^FAILED" "$OUT/k.log" | head
timeout 90 python3 -m lab.probe_fp8_step --shapes qwen2.5-coder-1.5b,qwen2.5-coder-3b --variants cuda/c,cuda > "$OUT/step.log" 2>&1
grep "^|" "$OUT/step.log"
