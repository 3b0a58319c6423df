#!/usr/bin/env bash
# The FP8 step with its CUDA QKV / o_proj / down_proj releasing the next kernel (PDL) right after their wait
# (tuning knobs fp8_qkv_early, fp8_o_proj_early, fp8_down_early; lab.probe_fp8_step flags q, e, d) against the
# row's, on three shapes (us per step, random weights, ctx 512); a table last. Name nvidia-h200 for figures. Usage: OUT=... BUDGET=150 bash scripts/gpu/early.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; LOG=$OUT/early; mkdir -p "$LOG"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
BUDGET=${BUDGET:-150}
source scripts/gpu/lib.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$LOG/gpu.txt" 2>&1
step step-fp8 110 python3 -m lab.probe_fp8_step --shapes qwen2.5-coder-1.5b,llama-3.2-1b,qwen2.5-coder-3b \
  --variants cuda,cuda/q,cuda/d,cuda/qd,cuda/qde
grep "^|" "$LOG/step-fp8.log"
summary
