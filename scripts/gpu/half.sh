#!/usr/bin/env bash
# The CUDA FP8 GEMVs with f16x2 chunk sums (Config.half, kernels/csrc/fp8_gemv.cu HALF) on the GPU: their tests
# (within HALF_TOL of the float32 references; the rel errors printed), each GEMV per launch against the float32
# sums and bf16 (lab.probe_fp8_cuda), the FP8 step with half in all four GEMVs ("h") or gate/up and down only
# ("m") against the row's (lab.probe_fp8_step), then the FP8 fast-path tests. Name nvidia-h200 for figures.
# Usage: OUT=... BUDGET=200 bash scripts/gpu/half.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; LOG=$OUT/half; mkdir -p "$LOG"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
BUDGET=${BUDGET:-200}
source scripts/gpu/lib.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$LOG/gpu.txt" 2>&1
PYTEST=(python3 -m pytest -q -s -p no:cacheprovider -p no:randomly -o addopts="" -rfE)
step kernel-tests 45 "${PYTEST[@]}" tests/kernels/test_fp8_cuda_gemv.py
grep -h "rel err" "$LOG/kernel-tests.log" | sort -k2 | head -40
step probe-1.5b 45 python3 -m lab.probe_fp8_cuda --shapes qwen2.5-coder-1.5b
step step-fp8 60 python3 -m lab.probe_fp8_step --shapes qwen2.5-coder-1.5b,llama-3.2-1b,qwen2.5-coder-3b \
  --variants cuda,cuda/h,cuda/m
step probe-quick 40 python3 -m lab.probe_fp8_cuda --shapes llama-3.2-1b,qwen2.5-coder-3b --quick
step fast-path-tests 45 "${PYTEST[@]}" -m gpu tests/inference/test_fp8_fast_path.py
grep -h "^|" "$LOG/probe-1.5b.log" | grep -v "triton fp8" | head -60
tail -12 "$LOG/step-fp8.log"
summary
