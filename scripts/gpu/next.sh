#!/usr/bin/env bash
# The first GPU window after session 4 (which had no device time left to check its work): the one-pass FP8
# dequantization kernel of the prefill (kernels/fp8_dequantize.py) on the GPU (its tests, then the FP8 fast-path
# tests whose prefill now uses it), the CUDA FP8 GEMV tests (then with K-split residual configs, since removed),
# the FP8/bf16 bench on the 1.5B shape (TTFT shows the prefill: before it,
# H200 18.4 vs 4.7 ms at 128 tokens), then why FP8 loses the H200's bandwidth: the step kernel by kernel, FP8
# and bf16 (lab.profile_step), each CUDA FP8 GEMV config per
# launch on this GPU (lab.probe_fp8_cuda; the rule was tuned on an H100); with $MODEL (the default model's GGUF,
# scripts/gpu/model.sh) the FP8 quality gate on the GPU, now quantized from the GGUF's float32 values.
# Name nvidia-h200 for figures.
# Usage: OUT=... BUDGET=240 [MODEL=/tmp/smollm2.gguf] bash scripts/gpu/next.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; LOG=$OUT/next; mkdir -p "$LOG"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
BUDGET=${BUDGET:-240}
source scripts/gpu/lib.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$LOG/gpu.txt" 2>&1
PYTEST=(python3 -m pytest -q -p no:cacheprovider -p no:randomly -o addopts="" -rfE)
step dequant-tests 30 "${PYTEST[@]}" tests/kernels/test_fp8_dequantize.py
step ksplit-tests 40 "${PYTEST[@]}" tests/kernels/test_fp8_cuda_gemv.py
step bench-1.5b 35 python3 -m inference.bench --shape qwen2.5-coder-1.5b --weights fp8,bf16 --tokens 256 \
  --json "$LOG/bench-1.5b.json"
step profile-step 60 python3 -m lab.profile_step qwen2.5-coder-1.5b --weights fp8,bf16 --no-floor
step fast-path-tests 45 "${PYTEST[@]}" -m gpu tests/inference/test_fp8_fast_path.py
step probe-fp8-cuda 60 python3 -m lab.probe_fp8_cuda --shapes qwen2.5-coder-1.5b
if [ -f "${MODEL:-}" ]; then
  step quality-fp8 60 python3 -m inference.quality --model "$MODEL" --device cuda --weights fp8 --json "$LOG/quality-fp8.json"
fi
summary
