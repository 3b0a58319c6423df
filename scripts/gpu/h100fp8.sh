#!/usr/bin/env bash
# The H100 shares the H200's tuning row: the FP8 step there with the row's streamed GEMVs (gate/up, down up to
# K = 8960) against CUDA-core kernels only (cuda/c) and gate/up only (cuda/g), on three shapes, then the FP8 gpu
# tests. Usage (kind nvidia-h100-x1): OUT=... BUDGET=200 bash scripts/gpu/h100fp8.sh      logs: $OUT/h100fp8/
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; LOG=$OUT/h100fp8; mkdir -p "$LOG"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
BUDGET=${BUDGET:-200}
source scripts/gpu/lib.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$LOG/gpu.txt" 2>&1
step step-fp8 70 python3 -m lab.probe_fp8_step --shapes qwen2.5-coder-1.5b,llama-3.2-1b,qwen2.5-coder-3b \
  --variants cuda/c,cuda,cuda/g
step fp8-gpu-tests 100 python3 -m pytest -q -p no:cacheprovider -p no:randomly -o addopts="" -rfE -m gpu \
  tests/kernels/test_fp8_stream_gemv.py tests/inference/test_fp8_fast_path.py
grep "^|" "$LOG/step-fp8.log"
summary
