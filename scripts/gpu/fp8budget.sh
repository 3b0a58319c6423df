#!/usr/bin/env bash
# Streamed FP8 GEMVs with small rings (tuning fp8_stream_budget; lab.probe_fp8_step flag b) so that a streamed
# QKV (o_proj) can share an SM with the streamed down_proj (attention) before it: the FP8 step with the row's
# streaming (cuda), + QKV (cuda/gdq), + QKV small (cuda/gdqb), down small only (cuda/gdb), + QKV + o small
# (cuda/gdqob), on the 1.5B and Llama-3.2-1B. Usage: OUT=... bash scripts/gpu/fp8budget.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD
timeout 150 python3 -m lab.probe_fp8_step --shapes qwen2.5-coder-1.5b,llama-3.2-1b \
  --variants cuda,cuda/gdq,cuda/gdqb,cuda/gdb,cuda/gdqob > "$OUT/budget.log" 2>&1
grep "^|" "$OUT/budget.log"
