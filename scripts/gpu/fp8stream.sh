#!/usr/bin/env bash
# The streamed FP8 GEMVs (kernels/fp8_stream_gemv.py) on the GPU: their tests, each layer GEMV per launch against
# kernels.fp8_cuda_gemv and bf16 (lab.probe_fp8_cuda --quick: "fp8 stream" rows), then the FP8 step with them
# for gate/up (cuda/g), with down (gd), all four (s) against the row's
# (lab.probe_fp8_step), on three shapes. Name nvidia-h200 for figures. Usage: OUT=... BUDGET=200 bash scripts/gpu/fp8stream.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; LOG=$OUT/fp8stream; mkdir -p "$LOG"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
BUDGET=${BUDGET:-200}
source scripts/gpu/lib.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$LOG/gpu.txt" 2>&1
PYTEST=(python3 -m pytest -q -x -p no:cacheprovider -p no:randomly -o addopts="" -rfE -o faulthandler_timeout=60)
step kernel-tests 60 "${PYTEST[@]}" tests/kernels/test_fp8_stream_gemv.py
step probe 50 python3 -m lab.probe_fp8_cuda --shapes qwen2.5-coder-1.5b,llama-3.2-1b,qwen2.5-coder-3b --quick
grep -h "^|" "$LOG/probe.log" | grep -v "triton fp8"
step step-fp8 70 python3 -m lab.probe_fp8_step --shapes qwen2.5-coder-1.5b,llama-3.2-1b,qwen2.5-coder-3b \
  --variants cuda,cuda/g,cuda/gd,cuda/s
grep "^|" "$LOG/step-fp8.log"
summary
